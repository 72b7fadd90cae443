package domain

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func rl(cpu string, gpus int64) corev1.ResourceList {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if gpus > 0 {
		l[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return l
}

func gpuNode(name string) *corev1.Node {
	alloc := rl("64", 8)
	alloc[corev1.ResourcePods] = resource.MustParse("110")
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
}

func usedBy(name string, req corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", UID: "u-" + "name"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}
}

func member(typ topologyv1alpha1.MemberType, name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: typ, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// cluster: 4 racks (tier 1) of 4 nodes with 8 GPUs each; spine-0 = racks 0,1 and spine-1 = racks
// 2,3 (tier 2); core = both spines (tier 3); nodes out-0..out-3 are in no HyperNode.
type cluster struct {
	cache *topology.Cache
	infos map[string]*framework.NodeInfo
	order []string
}

func newCluster() *cluster {
	c := &cluster{cache: topology.NewCache(), infos: map[string]*framework.NodeInfo{}}
	add := func(n string) {
		ni := framework.NewNodeInfo()
		ni.SetNode(gpuNode(n))
		c.infos[n] = ni
		c.order = append(c.order, n)
		c.cache.AddOrUpdateNode(gpuNode(n))
	}
	for r := 0; r < 4; r++ {
		var ms []topologyv1alpha1.MemberSpec
		for i := 0; i < 4; i++ {
			n := fmt.Sprintf("n%d", r*4+i)
			add(n)
			ms = append(ms, member(topologyv1alpha1.MemberTypeNode, n))
		}
		c.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rack-%d", r)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: ms}})
	}
	for i := 0; i < 4; i++ {
		add(fmt.Sprintf("out-%d", i))
	}
	for s := 0; s < 2; s++ {
		c.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spine-%d", s)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: []topologyv1alpha1.MemberSpec{
				member(topologyv1alpha1.MemberTypeHyperNode, fmt.Sprintf("rack-%d", 2*s)),
				member(topologyv1alpha1.MemberTypeHyperNode, fmt.Sprintf("rack-%d", 2*s+1))}}})
	}
	c.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "core"},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: 3, Members: []topologyv1alpha1.MemberSpec{
			member(topologyv1alpha1.MemberTypeHyperNode, "spine-0"), member(topologyv1alpha1.MemberTypeHyperNode, "spine-1")}}})
	return c
}

func (c *cluster) use(node string, req corev1.ResourceList) {
	c.infos[node].AddPod(usedBy(node+"-used", req))
}

func (c *cluster) nodeInfos() []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.infos[n])
	}
	return out
}

func pods(n int, req corev1.ResourceList) []corev1.ResourceList {
	out := make([]corev1.ResourceList, n)
	for i := range out {
		out[i] = req
	}
	return out
}

func hard(tier int) gang.Limit {
	return gang.Limit{Hard: true, Tier: tier, Describe: fmt.Sprintf("highestTierAllowed=%d", tier)}
}

var soft = gang.Limit{Describe: "soft"}

func TestChoose(t *testing.T) {
	worker := rl("4", 8)
	tests := []struct {
		name    string
		setup   func(*cluster)
		req     Request
		want    string // HyperNode name, RootName for the cluster
		wantErr []string
		notErr  []string // what the error must not say
	}{
		{name: "4 pods fit a rack; ties by name", req: Request{Demand: Demand{Pods: pods(4, worker)}, Topology: true, Limit: hard(1)}, want: "rack-0"},
		{name: "best fit: the fullest rack that still holds the gang",
			setup: func(c *cluster) { c.use("n4", rl("1", 8)); c.use("n5", rl("1", 8)); c.use("n12", rl("1", 8)) },
			req:   Request{Demand: Demand{Pods: pods(2, worker)}, Topology: true, Limit: hard(1)}, want: "rack-1"},
		{name: "partial GPU use counts (assumed pods are in the snapshot)",
			setup: func(c *cluster) { c.use("n0", rl("1", 1)) },
			req:   Request{Demand: Demand{Pods: pods(4, worker)}, Topology: true, Limit: hard(1)}, want: "rack-1"},
		{name: "8 pods go to a spine when hard allows tier 2", req: Request{Demand: Demand{Pods: pods(8, worker)}, Topology: true, Limit: hard(2)}, want: "spine-0"},
		{name: "8 pods wait when hard forbids tier 2", req: Request{Demand: Demand{Pods: pods(8, worker)}, Topology: true, Limit: hard(1)},
			wantErr: []string{"8 more pods needing 32 cpu, 64 nvidia.com/gpu", "no tier-1 HyperNode has room for 8 pods (the best: rack-0 has room for 4 of them)", "tier 2 and above not allowed (highestTierAllowed=1)"}},
		{name: "hard tier 3 reaches core, not the root", req: Request{Demand: Demand{Pods: pods(17, worker)}, Topology: true, Limit: hard(3)},
			wantErr: []string{"no tier-3 HyperNode has room for 17 pods (the best: core has room for 16 of them)", "the cluster root (tier 4) is not allowed"}},
		{name: "hard tier 4 includes the root", req: Request{Demand: Demand{Pods: pods(17, worker)}, Topology: true, Limit: hard(4)}, want: topology.RootName},
		{name: "soft falls back to the root, which includes nodes outside every HyperNode",
			req: Request{Demand: Demand{Pods: pods(20, worker)}, Topology: true, Limit: soft}, want: topology.RootName},
		{name: "soft prefers the lowest tier", req: Request{Demand: Demand{Pods: pods(3, worker)}, Topology: true, Limit: soft}, want: "rack-0"},
		{name: "too big for the cluster", req: Request{Demand: Demand{Pods: pods(21, worker)}, Topology: true, Limit: soft},
			wantErr: []string{"the whole cluster has room for 20 of them"}},
		{name: "no topology: the cluster", req: Request{Demand: Demand{Pods: pods(4, worker)}}, want: topology.RootName},
		{name: "placed pods anchor the gang to their rack's ancestors",
			req: Request{Demand: Demand{Pods: pods(2, worker)}, Topology: true, Limit: hard(2), Placed: []string{"n9"}}, want: "rack-2"},
		{name: "placed pods widen to the spine when their rack is full",
			setup: func(c *cluster) { c.use("n8", rl("1", 8)); c.use("n9", rl("1", 8)); c.use("n10", rl("1", 8)) },
			req:   Request{Demand: Demand{Pods: pods(2, worker)}, Topology: true, Limit: hard(2), Placed: []string{"n9"}}, want: "spine-1"},
		{name: "placed pods spanning spines exceed hard tier 2",
			req:     Request{Demand: Demand{Pods: pods(1, worker)}, Topology: true, Limit: hard(2), Placed: []string{"n0", "n15"}},
			wantErr: []string{"placed pods already span HyperNode core (tier 3), above highestTierAllowed=2"}},
		{name: "placed pods outside every HyperNode: only the root (soft)",
			req: Request{Demand: Demand{Pods: pods(1, worker)}, Topology: true, Limit: soft, Placed: []string{"out-1"}}, want: topology.RootName},
		{name: "ineligible nodes do not count",
			req: Request{Demand: Demand{Pods: pods(4, worker)}, Topology: true, Limit: hard(1),
				Eligible: func(n *corev1.Node) bool { return n.Name != "n0" }}, want: "rack-1"},
		{name: "freed capacity (another gang's reservations) counts",
			setup: func(c *cluster) {
				for i := 0; i < 16; i++ {
					c.use(fmt.Sprintf("n%d", i), rl("1", 8))
				}
			},
			req: Request{Demand: Demand{Pods: pods(2, worker)}, Topology: true, Limit: hard(1),
				Freed: map[string]Freed{"n13": {Resources: rl("1", 8), Pods: 1}, "n14": {Resources: rl("1", 8), Pods: 1}}}, want: "rack-3"},
		{name: "minResources floor pushes the gang up a tier",
			req: Request{Demand: Demand{Pods: pods(2, worker), Min: rl("1", 40)}, Topology: true, Limit: hard(2)}, want: "spine-0"},
		{name: "heterogeneous gang: launcher without GPUs and 4 workers fit one rack",
			req: Request{Demand: Demand{Pods: append(pods(4, worker), rl("8", 0))}, Topology: true, Limit: hard(1)}, want: "rack-0"},
		{name: "heterogeneous gang that only packs one level up",
			setup: func(c *cluster) {
				for i := 0; i < 16; i++ {
					c.use(fmt.Sprintf("n%d", i), rl("56", 0)) // 8 cpu left per node
				}
			},
			// Rooms by the smallest pod (4 cpu) say a rack holds 8 and its summed cpu (32) covers
			// 4×4+10=26, but the 10-cpu launcher fits no node: packing rejects every rack and spine.
			req: Request{Demand: Demand{Pods: append(pods(4, rl("4", 0)), rl("10", 0))}, Topology: true, Limit: hard(2)},
			wantErr: []string{"5 more pods needing 26 cpu", "no tier-1 HyperNode can pack the pods (4 checked)",
				"no tier-2 HyperNode can pack the pods (2 checked)"}},
		{name: "a pod larger than any node: no tier helps, and the message says so",
			req:     Request{Demand: Demand{Pods: pods(2, rl("4", 16))}, Topology: true, Limit: soft},
			wantErr: []string{"no node can hold one pod of the gang, at any tier", "16 nvidia.com/gpu (at most 8 nvidia.com/gpu on one node)", "lower the pod's requests or add larger nodes"},
			notErr:  []string{"tier-1", "whole cluster", "cpu"}},
		{name: "a pod larger than any node it may use (the others are ineligible)",
			req: Request{Demand: Demand{Pods: pods(1, rl("4", 8))}, Topology: true, Limit: soft,
				Eligible: func(n *corev1.Node) bool { return n.Name == "n0" }},
			setup: func(c *cluster) {
				n := gpuNode("n0")
				n.Status.Allocatable[gpu] = *resource.NewQuantity(4, resource.DecimalSI)
				c.infos["n0"] = framework.NewNodeInfo()
				c.infos["n0"].SetNode(n)
			},
			wantErr: []string{"no node can hold one pod of the gang", "8 nvidia.com/gpu (at most 4 nvidia.com/gpu on one node)"}},
		{name: "units: cpu in cores throughout, rooms in pods, and the minResources floor that falls short",
			req: Request{Demand: Demand{Pods: pods(5, rl("250m", 1)), Min: rl("300", 0)}, Topology: true, Limit: hard(1)},
			wantErr: []string{"5 more pods needing 1.25 cpu, 5 nvidia.com/gpu (the PodGroup's minResources ask for 300 cpu)",
				"no tier-1 HyperNode has room for 5 pods (the best: rack-0 has room for all 5 pods but only 256 cpu free of the 300 cpu the gang needs in total)"},
			notErr: []string{"m cpu", "no node can hold"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster()
			if tc.setup != nil {
				tc.setup(c)
			}
			var got *Choice
			var err error
			c.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, c.nodeInfos(), tc.req) })
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("chose %s, want an error", got.HyperNode)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				for _, w := range tc.notErr {
					if strings.Contains(err.Error(), w) {
						t.Errorf("error %q mentions %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got.HyperNode != tc.want {
				t.Fatalf("chose %s (tier %d), want %s", got.HyperNode, got.Tier, tc.want)
			}
			if got.Root != (tc.want == topology.RootName) || (got.Nodes != nil && got.Nodes.Len() == 0) || (!got.Root && got.Nodes == nil) {
				t.Fatalf("bad node set: root=%v nodes=%v", got.Root, got.Nodes)
			}
			if got.Room < got.Need {
				t.Fatalf("room %d < need %d", got.Room, got.Need)
			}
		})
	}
}

func TestChooseBoundedSearch(t *testing.T) {
	c := newCluster()
	for i := 0; i < 16; i++ {
		c.use(fmt.Sprintf("n%d", i), rl("56", 0))
	}
	req := Request{Demand: Demand{Pods: append(pods(4, rl("4", 0)), rl("10", 0))}, Topology: true, Limit: hard(1), MaxCandidatesPerTier: 2}
	c.cache.Read(func(tr topology.Tree) {
		_, err := Choose(tr, c.nodeInfos(), req)
		if err == nil || !strings.Contains(err.Error(), "(2 checked)") {
			t.Fatalf("err = %v, want a bounded search of 2 candidates", err)
		}
	})
}
