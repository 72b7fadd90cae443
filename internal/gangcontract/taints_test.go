package gangcontract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func taintedNode(name string, unschedulable bool, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
}

func TestUntoleratedTaints(t *testing.T) {
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	nodes := []*corev1.Node{
		taintedNode("n3", false, infra, gpu),
		taintedNode("n1", false, infra),
		taintedNode("n2", false, soft),
		taintedNode("n4", true, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}),
	}
	got := UntoleratedTaints(nodes, nil, false)
	assert.Equal(t, []UntoleratedTaint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule, Nodes: []string{"n1", "n3"}},
		{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule, Cordon: true, Nodes: []string{"n4"}},
		{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoExecute, Nodes: []string{"n3"}},
	}, got, "PreferNoSchedule keeps no pod off; the cordon's own taint is the cordon")
	assert.Equal(t, "dedicated=infra:NoSchedule", got[0].String())
	assert.Equal(t, "add the toleration {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}", got[0].Remedy())
	assert.Equal(t, "add the toleration {key: nvidia.com/gpu, operator: Exists, effect: NoExecute}", got[2].Remedy())
	assert.Contains(t, got[1].Remedy(), "uncordon")

	// The toleration each remedy names admits the pods.
	tolerations := []corev1.Toleration{
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	assert.Empty(t, UntoleratedTaints(nodes, tolerations, false))
	assert.Equal(t, "dedicated=infra:NoSchedule on 2 node(s) (add the toleration {key: dedicated, operator: Equal, value: infra, effect: NoSchedule})",
		DescribeUntolerated(got[:1]))
}

// The node controller's taints of a node that is not Ready are explained, never offered as a
// toleration: tolerating them would put the gang on a node that cannot run it.
func TestNodeNotReadyTaints(t *testing.T) {
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	var nodes []*corev1.Node
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5", "n6"} {
		nodes = append(nodes, taintedNode(n, false, unreachable))
	}
	nodes = append(nodes, taintedNode("n7", false, notReady), taintedNode("n8", true))
	got := UntoleratedTaints(nodes, nil, false)
	byKey := map[string]UntoleratedTaint{}
	for _, u := range got {
		byKey[u.Key] = u
	}
	u := byKey[corev1.TaintNodeUnreachable]
	assert.True(t, u.NodeNotReady())
	assert.Equal(t, "n1, n2, n3, n4 and 2 more", u.NodeNames())
	assert.Contains(t, u.Remedy(), "kubelet stopped reporting")
	assert.NotContains(t, u.Remedy(), "toleration")
	assert.True(t, byKey[corev1.TaintNodeNotReady].NodeNotReady())
	assert.Contains(t, byKey[corev1.TaintNodeNotReady].Remedy(), "Ready=False")
	assert.NotContains(t, byKey[corev1.TaintNodeNotReady].Remedy(), "toleration")
	assert.False(t, byKey[corev1.TaintNodeUnschedulable].NodeNotReady(), "a cordon is not the node controller's")
	assert.Equal(t, "n8", byKey[corev1.TaintNodeUnschedulable].NodeNames())
}
