package hypertopology

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// leafHN is a tier-1 HyperNode holding the named nodes.
func leafHN(name string, nodes ...string) *topologyv1alpha1.HyperNode {
	h := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1}}
	for _, n := range nodes {
		h.Spec.Members = append(h.Spec.Members, topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode,
			Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: n}}})
	}
	return h
}

// parentHN is a HyperNode of the given tier holding the named HyperNodes.
func parentHN(name string, tier int, children ...string) *topologyv1alpha1.HyperNode {
	h := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier}}
	for _, c := range children {
		h.Spec.Members = append(h.Spec.Members, topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeHyperNode,
			Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: c}}})
	}
	return h
}

func nodeInfo(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return ni
}

// TestPreScoreRoomsOutOfRange: a plan whose rooms slice is shorter than the tree's HyperNode
// indexes (a plan stamped with a generation it was not computed for) must not panic PreScore.
func TestPreScoreRoomsOutOfRange(t *testing.T) {
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{pg("g", time.Now(), 1)}, nil)
	p.tree = topology.NewCache()
	for _, n := range []string{"n1", "n2"} {
		p.tree.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	p.tree.AddOrUpdateHyperNode(leafHN("a", "n1"))
	p.tree.AddOrUpdateHyperNode(leafHN("b", "n2"))
	var gen int64
	p.tree.Read(func(tr topology.Tree) { gen = tr.Generation() })

	spec := gang.SpecOf(pg("g", time.Now(), 1), nil)
	cs := framework.NewCycleState()
	cs.Write(stateKey, &state{key: spec.Key, spec: &spec, plan: &plan{root: true, treeGen: gen, rooms: []int32{1}, need: 1}})
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("PreScore panicked: %v", r)
		}
	}()
	if st := p.PreScore(context.Background(), cs, pod("p", "g", 0, 1), []fwk.NodeInfo{nodeInfo("n1"), nodeInfo("n2")}); st != nil {
		t.Fatalf("PreScore: %v", st)
	}
}

// TestChooseHonoursEachMembersConstraints: gang members with different nodeSelectors. The domain
// must have nodes for each of them; sizing it by the current pod's constraints alone picks rack-1,
// where the other member can never run (and the gang livelocks re-planning the same domain).
func TestChooseHonoursEachMembersConstraints(t *testing.T) {
	g := pg("g", time.Now(), 2)
	a, b := pod("a", "g", 0, 1), pod("b", "g", 0, 1)
	a.Spec.NodeSelector = map[string]string{"pool": "a"}
	b.Spec.NodeSelector = map[string]string{"pool": "b"}
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, []*corev1.Pod{a, b})
	p.tree = topology.NewCache()
	// rack-1 = n0 (pool a); rack-2 = n2, n4 (pool a) and n3 (pool b). Rack-1 is the tighter fit
	// for pool-a pods, but has no node for b.
	pools := map[string]string{"n0": "a", "n2": "a", "n3": "b", "n4": "a"}
	var infos []fwk.NodeInfo
	for _, n := range []string{"n0", "n2", "n3", "n4"} {
		alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), "nvidia.com/gpu": resource.MustParse("8"),
			corev1.ResourcePods: resource.MustParse("110")}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": pools[n]}},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		infos = append(infos, ni)
		p.tree.AddOrUpdateNode(node)
	}
	p.tree.AddOrUpdateHyperNode(leafHN("rack-1", "n0"))
	p.tree.AddOrUpdateHyperNode(leafHN("rack-2", "n2", "n3", "n4"))
	p.tree.AddOrUpdateHyperNode(parentHN("spine", 2, "rack-1", "rack-2"))
	spec := gang.SpecOf(g, a)
	spec.Topology = &gang.Topology{Mode: gang.Hard, HighestTier: ptr.To(2)}
	for _, cur := range []*corev1.Pod{a, b} {
		var got string
		p.tree.Read(func(tr topology.Tree) {
			c, _, err := p.choose(tr, cur, &spec, p.members(spec.Key), infos, nil)
			if err != nil {
				t.Fatalf("choose for %s: %v", cur.Name, err)
			}
			got = c.HyperNode
		})
		if got != "rack-2" {
			t.Errorf("choose for %s = %s, want rack-2 (the only rack with a node for each member)", cur.Name, got)
		}
	}
}
