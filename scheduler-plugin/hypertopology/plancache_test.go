package hypertopology

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	schedlisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// A PodGroup status write bumps its generation (Volcano's PodGroup CRD has no status subresource)
// but changes nothing placement depends on: the gang's cached plan survives it, and the next
// member's PreFilter reuses it instead of choosing the domain again. A change of minResources does
// drop the plan.
func TestStatusWriteKeepsPlan(t *testing.T) {
	g := pg("g", time.Now(), 2)
	g.Generation = 1
	g.Spec.NetworkTopology = &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	a, b := pod("a", "g", 0, 1), pod("b", "g", 0, 1)
	p := testPlugin(t, nil, []*corev1.Pod{a, b})
	pgs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, pgs.Add(g))
	p.pgLister = schedlisters.NewPodGroupLister(pgs)
	p.events = newRecorder(&captureRecorder{})
	p.tree = topology.NewCache()
	var nodes []fwk.NodeInfo
	for _, n := range []string{"n1", "n2"} {
		alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}
		p.tree.AddOrUpdateNode(node)
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		nodes = append(nodes, ni)
	}
	p.tree.AddOrUpdateHyperNode(leafHN("leaf", "n1", "n2"))
	key := gang.Key{Namespace: "ns", Name: "g"}
	preFilter := func(pod *corev1.Pod) {
		t.Helper()
		_, st := p.PreFilter(context.Background(), framework.NewCycleState(), pod, nodes)
		require.True(t, st.IsSuccess(), "PreFilter of %s: %v", pod.Name, st.AsError())
	}

	preFilter(a)
	first := p.getPlan(key)
	require.NotNil(t, first, "PreFilter made no plan")

	// The status writer's update: phase and counts, a new generation, the same spec.
	written := g.DeepCopy()
	written.Generation, written.ResourceVersion = 2, "2"
	written.Status = schedulingv1beta1.PodGroupStatus{Phase: schedulingv1beta1.PodGroupInqueue, Running: 1}
	require.NoError(t, pgs.Update(written))
	p.onPodGroupUpdate(g, written)
	require.Same(t, first, p.getPlan(key), "a status write dropped the gang's plan")
	preFilter(b)
	require.Same(t, first, p.getPlan(key), "PreFilter chose the domain again after a status write")

	// What placement depends on changes: the plan goes.
	priced := written.DeepCopy()
	priced.Generation, priced.ResourceVersion = 3, "3"
	priced.Spec.MinResources = &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	require.NoError(t, pgs.Update(priced))
	p.onPodGroupUpdate(written, priced)
	require.Nil(t, p.getPlan(key), "a minResources change must drop the plan")
}
