// Package scheduler benchmarks hyperbatch's scheduler plugin: the gang domain choice on a large
// HyperNode tree, the tree cache's updates and (with a control plane, see throughput_bench_test.go)
// scheduling throughput. Run: go test -run '^$' -bench . -benchmem ./bench/scheduler/
package scheduler

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

// The benchmark tree: 6,000 nodes with 8 GPUs each under 9,600 HyperNodes in four tiers —
// 6,000 tier-1 (one node: an NVLink island), 3,000 tier-2 (two tier-1), 500 tier-3 (six tier-2,
// 12 nodes) and 100 tier-4 (five tier-3, 60 nodes) — plus the virtual root (tier 5).
const (
	numNodes   = 6000
	perTier2   = 2
	perTier3   = 6
	perTier4   = 5
	gpusNode   = 8
	cpuNode    = "128"
	totalHyper = numNodes + numNodes/perTier2 + numNodes/perTier2/perTier3 + numNodes/perTier2/perTier3/perTier4
)

func exactNode(n string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: n}}}
}

func exactHyper(n string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeHyperNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: n}}}
}

func hyperNodes() []*topologyv1alpha1.HyperNode {
	var out []*topologyv1alpha1.HyperNode
	add := func(name string, tier int, members []topologyv1alpha1.MemberSpec) {
		out = append(out, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, Members: members}})
	}
	for i := 0; i < numNodes; i++ {
		add(fmt.Sprintf("t1-%d", i), 1, []topologyv1alpha1.MemberSpec{exactNode(nodeName(i))})
	}
	groups := func(tier, prevCount, fan int, prev string) int {
		n := prevCount / fan
		for g := 0; g < n; g++ {
			var ms []topologyv1alpha1.MemberSpec
			for c := 0; c < fan; c++ {
				ms = append(ms, exactHyper(fmt.Sprintf("%s-%d", prev, g*fan+c)))
			}
			add(fmt.Sprintf("t%d-%d", tier, g), tier, ms)
		}
		return n
	}
	n2 := groups(2, numNodes, perTier2, "t1")
	n3 := groups(3, n2, perTier3, "t2")
	groups(4, n3, perTier4, "t3")
	return out
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

func node(i int) *corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuNode), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("110"), gpu: *resource.NewQuantity(gpusNode, resource.DecimalSI)}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%4)}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
}

func buildCache(b *testing.B) *topology.Cache {
	c := topology.NewCache()
	for i := 0; i < numNodes; i++ {
		c.AddOrUpdateNode(node(i))
	}
	for _, h := range hyperNodes() {
		c.AddOrUpdateHyperNode(h)
	}
	c.Read(func(t topology.Tree) {
		if ok, why := t.Ready(); !ok || t.Len() != totalHyper {
			b.Fatalf("tree not ready (%s) or wrong size %d", why, t.Len())
		}
	})
	return c
}

// nodeInfos builds snapshot NodeInfos; about 40% of nodes run pods using 1–8 of their GPUs, so
// rooms differ and best fit has to look at every candidate.
func nodeInfos() []fwk.NodeInfo {
	rng := rand.New(rand.NewSource(1))
	out := make([]fwk.NodeInfo, numNodes)
	for i := 0; i < numNodes; i++ {
		var pods []*corev1.Pod
		if rng.Intn(10) < 4 {
			used := rng.Intn(gpusNode) + 1
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%d", i), Namespace: "x", UID: "busy"},
				Spec: corev1.PodSpec{NodeName: nodeName(i), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: *resource.NewQuantity(int64(used), resource.DecimalSI)}}}}}})
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(node(i))
		out[i] = ni
	}
	return out
}

func worker(gpus int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
}

func repeat(n int, r corev1.ResourceList) []corev1.ResourceList {
	out := make([]corev1.ResourceList, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// BenchmarkDomainChoice is one gang's domain choice (what PreFilter does once per gang) on the
// 6,000-node / 9,600-HyperNode tree. Target: < 10 ms per gang.
func BenchmarkDomainChoice(b *testing.B) {
	c := buildCache(b)
	infos := nodeInfos()
	eligibleZone := func(n *corev1.Node) bool { return n.Labels["zone"] != "z3" }
	cases := []struct {
		name string
		req  domain.Request
		tier int // expected tier of the choice, 0 for an error
	}{
		{"8x1gpu-hard1", domain.Request{Demand: domain.Demand{Pods: repeat(8, worker(1))}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 1}}, 1},
		{"16x8gpu-hard4", domain.Request{Demand: domain.Demand{Pods: repeat(16, worker(8))}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 4}}, 4},
		{"64x8gpu-soft", domain.Request{Demand: domain.Demand{Pods: repeat(64, worker(8))}, Topology: true, Limit: gang.Limit{}}, 5},
		{"64x8gpu-hard3-fails", domain.Request{Demand: domain.Demand{Pods: repeat(64, worker(8))}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 3, Describe: "highestTierAllowed=3"}}, 0},
		{"24x8gpu-nodeSelector", domain.Request{Demand: domain.Demand{Pods: repeat(24, worker(8))}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 4}, Eligible: eligibleZone}, 4},
		{"hetero-1launcher+31x4gpu", domain.Request{Demand: domain.Demand{Pods: append(repeat(31, worker(4)), worker(0))}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 4}}, 4},
		{"minResources-8x2gpu", domain.Request{Demand: domain.Demand{Pods: repeat(8, worker(2)), Min: corev1.ResourceList{gpu: resource.MustParse("64")}}, Topology: true, Limit: gang.Limit{Hard: true, Tier: 4}}, 3},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c.Read(func(t topology.Tree) {
				ch, err := domain.Choose(t, infos, tc.req)
				switch {
				case tc.tier == 0 && err == nil:
					b.Fatalf("chose %s, want an error", ch.HyperNode)
				case tc.tier != 0 && err != nil:
					b.Fatalf("unexpected error: %v", err)
				case tc.tier != 0 && ch.Tier != tc.tier:
					b.Fatalf("chose %s at tier %d, want tier %d", ch.HyperNode, ch.Tier, tc.tier)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_, _ = domain.Choose(t, infos, tc.req)
				}
			})
		})
	}
}

// BenchmarkTreeBuild is the cache's initial build from 6,000 node and 9,600 HyperNode events.
func BenchmarkTreeBuild(b *testing.B) {
	hns := hyperNodes()
	nodes := make([]*corev1.Node, numNodes)
	for i := range nodes {
		nodes[i] = node(i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c := topology.NewCache()
		for _, n := range nodes {
			c.AddOrUpdateNode(n)
		}
		for _, h := range hns {
			c.AddOrUpdateHyperNode(h)
		}
		c.Read(func(topology.Tree) {})
	}
}

// BenchmarkNodeAddIncremental is one node joining the built tree (label-selected leaf) and leaving
// it again: no structural rebuild.
func BenchmarkNodeAddIncremental(b *testing.B) {
	c := buildCache(b)
	c.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "t1-extra"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1,
		Members: []topologyv1alpha1.MemberSpec{{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{
			LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "extra"}}}}}}})
	c.Read(func(topology.Tree) {})
	n := node(numNodes)
	n.Labels["pool"] = "extra"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.AddOrUpdateNode(n)
		c.DeleteNode(n.Name)
	}
}

// BenchmarkHyperNodeUpdateRebuild is one HyperNode changing (a tier-2 member swapped) followed by the
// structural rebuild the next read does.
func BenchmarkHyperNodeUpdateRebuild(b *testing.B) {
	c := buildCache(b)
	a := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "t1-0"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1,
		Members: []topologyv1alpha1.MemberSpec{exactNode(nodeName(0))}}}
	bb := a.DeepCopy()
	bb.Spec.Members = append(bb.Spec.Members, exactNode(nodeName(numNodes-1)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			c.AddOrUpdateHyperNode(bb)
		} else {
			c.AddOrUpdateHyperNode(a)
		}
		c.Read(func(topology.Tree) {})
	}
}
