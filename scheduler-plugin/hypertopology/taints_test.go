package hypertopology

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

func gpuNode(name string, taints ...corev1.Taint) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": "r0"}}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourcePods: resource.MustParse("110"),
			"nvidia.com/gpu": resource.MustParse("8")}}})
	return ni
}

// With every node tainted, the gang waits with the taint's name and the toleration that admits
// it, not with "a pod asks for more than any node has" (issue 38).
func TestEveryNodeTaintedNamesTheTaint(t *testing.T) {
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	var nodes []fwk.NodeInfo
	for i := 0; i < 4; i++ {
		nodes = append(nodes, gpuNode(fmt.Sprintf("n%d", i), infra))
	}
	g := pg("g", metav1.Now().Time, 2)
	g.Spec.NetworkTopology = &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	p0 := pod("g-0", "g", 0, 8)
	tree := topology.NewCache()
	for _, ni := range nodes {
		tree.AddOrUpdateNode(ni.Node())
	}
	tree.AddOrUpdateHyperNode(leafHN("leaf-0", "n0", "n1", "n2", "n3"))
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, []*corev1.Pod{p0})
	p.tree = tree
	spec := gang.SpecOf(g, p0)
	// The domain chooser alone says the pod is too big; the plugin's waiting message names the taint.
	var chooseErr error
	tree.Read(func(tr topology.Tree) { _, _, chooseErr = p.choose(tr, p0, &spec, []*corev1.Pod{p0}, nodes, nil) })
	if assert.Error(t, chooseErr) {
		assert.Contains(t, chooseErr.Error(), "more than any node")
	}
	_, status := p.planFor(context.Background(), p0, &spec, []*corev1.Pod{p0}, nodes)
	if assert.NotNil(t, status) {
		assert.Contains(t, status.Message(), "waits: no node may run the gang's pods: 4 of the 4 nodes have taints the pods do not tolerate: dedicated=infra:NoSchedule")
		assert.NotContains(t, status.Message(), "more than any node")
	}

	msg := noUsableNode(p0, nodes)
	assert.Equal(t, "no node may run the gang's pods: 4 of the 4 nodes have taints the pods do not tolerate: "+
		"dedicated=infra:NoSchedule on 4 node(s) (add the toleration {key: dedicated, operator: Equal, value: infra, effect: NoSchedule})", msg)
	assert.NotContains(t, msg, "more than any node")

	tolerant := p0.DeepCopy()
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	assert.Empty(t, noUsableNode(tolerant, nodes), "the toleration the message names admits the pod")
	assert.Empty(t, noUsableNode(p0, append(nodes, gpuNode("free"))), "one usable node: the chooser's own message stands")

	selective := p0.DeepCopy()
	selective.Spec.NodeSelector = map[string]string{"rack": "r9"}
	assert.Equal(t, "no node may run the gang's pods: 4 of the 5 nodes have taints the pods do not tolerate: "+
		"dedicated=infra:NoSchedule on 4 node(s) (add the toleration {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}); "+
		"1 node(s) do not match the pods' nodeSelector or required node affinity", noUsableNode(selective, append(nodes, gpuNode("free"))))
}

// A node whose kubelet stopped (the node controller's unreachable taints) leaves the gang too little
// room: the waiting message names that node and its taint, not only that no HyperNode has room
// (issue 36: a node going NotReady during a gang). Nodes the pods' nodeSelector leaves out are not
// named, nor the NoExecute taint the pods tolerate for 300 s.
func TestUnreachableNodeIsNamedWhenTheGangDoesNotFit(t *testing.T) {
	node := func(name, role string, taints ...corev1.Taint) fwk.NodeInfo {
		ni := framework.NewNodeInfo()
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": role}}, Spec: corev1.NodeSpec{Taints: taints},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}}})
		return ni
	}
	unreachable := []corev1.Taint{
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	}
	nodes := []fwk.NodeInfo{node("n0", "worker"), node("n1", "worker", unreachable...),
		node("infra", "infra", corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule})}
	tree := topology.NewCache()
	for _, ni := range nodes {
		tree.AddOrUpdateNode(ni.Node())
	}
	tree.AddOrUpdateHyperNode(leafHN("leaf-0", "n0"))
	tree.AddOrUpdateHyperNode(leafHN("leaf-1", "n1"))
	tree.AddOrUpdateHyperNode(parentHN("spine", 2, "leaf-0", "leaf-1"))
	tree.AddOrUpdateHyperNode(leafHN("leaf-infra", "infra"))

	g := pg("g", metav1.Now().Time, 4)
	g.Spec.NetworkTopology = &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode}
	var members []*corev1.Pod
	for i := 0; i < 4; i++ {
		p := pod(fmt.Sprintf("g-%d", i), "g", 0, 0)
		p.Spec.NodeSelector = map[string]string{"role": "worker"}
		// What the DefaultTolerationSeconds admission plugin adds to every pod.
		for _, k := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
		}
		members = append(members, p)
	}
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, members)
	p.tree = tree
	spec := gang.SpecOf(g, members[0])
	_, status := p.planFor(context.Background(), members[0], &spec, members, nodes)
	if assert.NotNil(t, status) {
		msg := status.Message()
		assert.Contains(t, msg, "no tier-2 HyperNode has room for 4 pods (the best: spine has room for 2 of them)")
		assert.Contains(t, msg, "; 1 of the 2 nodes the pods may otherwise use is excluded by taints the pods do not tolerate: "+
			"node.kubernetes.io/unreachable:NoSchedule on n1 (the node controller's taint: the node's kubelet stopped reporting (Ready=Unknown); it is lifted when the node is Ready again)")
		assert.NotContains(t, msg, "NoExecute", "the pods tolerate the NoExecute taint (300 s)")
		assert.NotContains(t, msg, "infra", "a node the nodeSelector leaves out is not named")
		assert.NotContains(t, msg, "add the toleration", "tolerating unreachable would put the gang on a node that cannot run it")
	}

	// Once n1 is Ready again (the taints lifted), the gang fits across both nodes.
	nodes[1] = node("n1", "worker")
	p2 := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, members)
	p2.tree = tree
	pl, status := p2.planFor(context.Background(), members[0], &spec, members, nodes)
	if assert.Nil(t, status) && assert.NotNil(t, pl) {
		assert.Equal(t, "spine", pl.hyper)
	}

	// The same with a not-ready node (Ready=False): the other node controller taint, named the same way.
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	assert.Equal(t, "1 of the 2 nodes the pods may otherwise use is excluded by taints the pods do not tolerate: "+
		"node.kubernetes.io/not-ready:NoSchedule on n1 (the node controller's taint: the node is not Ready (Ready=False); it is lifted when the node is Ready again)",
		excludedByTaint(members[0], []fwk.NodeInfo{nodes[0], node("n1", "worker", notReady), nodes[2]}))
	assert.Empty(t, excludedByTaint(members[0], nodes), "no node the pods may use is tainted")
}
