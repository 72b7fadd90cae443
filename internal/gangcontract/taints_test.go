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
