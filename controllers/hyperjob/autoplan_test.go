package hyperjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/autosplit"
)

// autoRJ is a replicatedJob in mode auto: replicas children of 2 pods × 4 GPUs inside one leaf.
func autoRJ(name string, replicas int32, clusters ...string) trainingv1alpha1.ReplicatedJob {
	rj := *staticRJ(8, task("w", 2, "4"))
	rj.Name, rj.Replicas, rj.ClusterNames = name, replicas, clusters
	rj.SplitPolicy.Mode = trainingv1alpha1.SplitModeAuto
	rj.TemplateSpec.NetworkTopology = &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	return rj
}

func TestBuildPlanAutoUndecided(t *testing.T) {
	hj := hyperJob(autoRJ("w", 3, "m1", "m2"), autoRJ("v", 1, "m2", "m3"))
	hj.Spec.MaxDomains = ptr.To[int32](2)
	p := plan(t, hj)
	require.Nil(t, p.Refusal)
	require.NotNil(t, p.Auto, "undecided: the plan asks for a decision")
	assert.Empty(t, p.children, "no child before the decision")
	assert.Equal(t, corev1.ResourceName(gpu), p.Auto.Resource)
	assert.Equal(t, []autosplit.Group{
		{Name: "w", Children: 3, Pods: 2, PodDemand: 4, Tier: 1},
		{Name: "v", Children: 1, Pods: 2, PodDemand: 4, Tier: 1},
	}, p.Auto.Groups)
	assert.Equal(t, []string{"m2"}, p.Auto.Candidates, "the clusters every replicatedJob allows")
	assert.Equal(t, 2, p.Auto.MaxDomains)
	assert.Equal(t, []string{"hj-w-0", "hj-w-1", "hj-w-2"}, p.Auto.Children["w"])
}

func TestBuildPlanAutoDecided(t *testing.T) {
	hj := hyperJob(autoRJ("w", 2))
	dec := &autosplit.Decision{Clusters: []string{"m1", "m2"}, Placements: []autosplit.Placement{
		{Cluster: "m1", Group: "w", Domains: map[string]int{"leaf-a": 1}},
		{Cluster: "m2", Group: "w", Domains: map[string]int{"leaf-b": 1}},
	}}
	p0 := plan(t, hj)
	rec := recordOf(dec, p0.Auto)
	assert.Equal(t, "m1: 1 (hj-w-0 in leaf-a); m2: 1 (hj-w-1 in leaf-b)", rec.String())
	v, err := rec.encode()
	require.NoError(t, err)
	hj.Annotations = map[string]string{hbv1.AutoSplitAnnotation: v}

	p := plan(t, hj)
	require.Nil(t, p.Refusal)
	require.Nil(t, p.Auto)
	require.Len(t, p.children, 2)
	for i, want := range []string{"m1", "m2"} {
		assert.Equal(t, []string{want}, p.children[i].pp.Spec.Placement.ClusterAffinity.ClusterNames, p.children[i].name)
	}
	st, newly := ComputeStatus(hj, p, nil)
	c := findCondition(st.Conditions, ConditionAutoSplit)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "decided: m1: 1 (hj-w-0 in leaf-a); m2: 1 (hj-w-1 in leaf-b)", c.Message)
	assert.Nil(t, newly, "the decision's Event comes from the decision, not from the status")

	// Scaled up after the decision: refused, the decision stands.
	hj.Spec.ReplicatedJobs[0].Replicas = 3
	p = plan(t, hj)
	require.NotNil(t, p.Refusal)
	assert.Equal(t, ReasonAutoSplitFixed, p.Refusal.Reason)
	assert.Contains(t, p.Refusal.Message, "children hj-w-2 are not in it")
	// A larger pod after the decision: refused too.
	hj.Spec.ReplicatedJobs[0] = autoRJ("w", 2)
	hj.Spec.ReplicatedJobs[0].TemplateSpec.Tasks[0] = task("w", 1, "8")
	p = plan(t, hj)
	require.NotNil(t, p.Refusal)
	assert.Contains(t, p.Refusal.Message, "now asks for 1 pods × 8")
}

func TestBuildPlanAutoNoChildren(t *testing.T) {
	p := plan(t, hyperJob(autoRJ("w", 0)))
	assert.Nil(t, p.Refusal)
	assert.Nil(t, p.Auto, "nothing to decide")
	assert.Empty(t, p.children)
}

func TestBuildPlanAutoRefusals(t *testing.T) {
	static := *staticRJ(8, task("w", 2, "4"))
	cases := []struct {
		name   string
		hj     *trainingv1alpha1.HyperJob
		reason string
		msg    string
	}{
		{"mixed modes", hyperJob(autoRJ("w", 1), static), ReasonMixedSplitModes, "every replicatedJob needs spec.replicatedJobs[].splitPolicy.mode auto"},
		{"no common cluster", hyperJob(autoRJ("w", 1, "m1"), autoRJ("v", 1, "m2")), ReasonClusterNotAllowed, "no cluster in common"},
		{"maxDomains 0", func() *trainingv1alpha1.HyperJob {
			hj := hyperJob(autoRJ("w", 1))
			hj.Spec.MaxDomains = ptr.To[int32](0)
			return hj
		}(), ReasonInvalidMaxDomains, "maxDomains 0 must be at least 1"},
		{"unreadable decision", func() *trainingv1alpha1.HyperJob {
			hj := hyperJob(autoRJ("w", 1))
			hj.Annotations = map[string]string{hbv1.AutoSplitAnnotation: "{"}
			return hj
		}(), ReasonAutoSplitFixed, "remove the annotation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(t, tc.hj)
			require.NotNil(t, p.Refusal)
			assert.Equal(t, tc.reason, p.Refusal.Reason)
			assert.Contains(t, p.Refusal.Message, tc.msg)
		})
	}
}

func TestSnapshotOf(t *testing.T) {
	node := func(name string, gpus int64, ready bool, labels map[string]string) corev1.Node {
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	}
	pod := func(ns, job, node string, gpus string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{batchv1alpha1.JobNameKey: job}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{container("main", gpus, false)}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	nodes := []corev1.Node{node("n0", 8, true, map[string]string{"rack": "a"}), node("n1", 8, true, map[string]string{"rack": "a"}),
		node("x2", 8, true, nil), node("n3", 8, false, nil)}
	pods := []corev1.Pod{
		pod("ns", "j", "n0", "4", corev1.PodRunning),
		pod("ns", "j", "n1", "4", corev1.PodSucceeded), // shown, but holds nothing
		pod("ns", "k", "n1", "0", corev1.PodRunning),   // no GPU
		pod("other", "", "x2", "2", corev1.PodRunning),
	}
	hns := []topologyv1alpha1.HyperNode{
		{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{
			{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "leaf-x"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{
			{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: "^x"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "spine"}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: []topologyv1alpha1.MemberSpec{
			{Type: topologyv1alpha1.MemberTypeHyperNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: "leaf-a"}}},
			{Type: topologyv1alpha1.MemberTypeHyperNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: "leaf-x"}}}}}},
	}
	s := snapshotOf("m1", gpu, nodes, pods, hns)
	assert.Equal(t, map[string]int64{"n0": 4, "n1": 8, "x2": 6}, s.member.Free, "a NotReady node has no free accelerators")
	assert.Equal(t, map[types.NamespacedName]int{{Namespace: "ns", Name: "j"}: 2}, s.shown)
	assert.Equal(t, []autosplit.HyperNode{
		{Name: "leaf-a", Tier: 1, Members: []string{"n0", "n1"}},
		{Name: "leaf-x", Tier: 1, Members: []string{"x2"}},
		{Name: "spine", Tier: 2, Members: []string{"leaf-a", "leaf-x"}},
	}, s.member.HyperNodes)
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
