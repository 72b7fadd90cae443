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
