package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func policies(t *testing.T, gang *bool, queue string) *defaults.Policies {
	p, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Gang: gang, Queue: queue, PriorityClassName: "batch-low"}}}})
	require.NoError(t, err)
	return p
}

func TestIsGang(t *testing.T) {
	plain := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	hb := corev1.PodSpec{SchedulerName: HyperbatchSchedulerName, Containers: plain.Containers}
	vc := corev1.PodSpec{SchedulerName: VolcanoSchedulerName, Containers: plain.Containers}
	queue := map[string]string{defaults.QueueNameAnnotation: "team-a"}
	ns := defaults.Namespace{Name: "ns"}
	for _, tc := range []struct {
		name string
		js   *jobsetv1alpha2.JobSet
		pols *defaults.Policies
		want bool
	}{
		{"plain JobSet", jobset(nil, rjob("a", 1, nil, nil, plain)), nil, false},
		{"hyperbatch-scheduler", jobset(nil, rjob("a", 1, nil, nil, plain), rjob("b", 1, nil, nil, hb)), nil, true},
		{"volcano", jobset(nil, rjob("a", 1, nil, nil, vc)), nil, true},
		{"queue annotation", jobset(queue, rjob("a", 1, nil, nil, plain)), nil, true},
		{"policy gang true", jobset(nil, rjob("a", 1, nil, nil, plain)), policies(t, ptr.To(true), ""), true},
		{"policy gang false", jobset(nil, rjob("a", 1, nil, nil, plain)), policies(t, ptr.To(false), ""), false},
		{"opt-out beats scheduler name", jobset(map[string]string{hbv1.GangAnnotation: "false"}, rjob("a", 1, nil, nil, hb)), nil, false},
		{"opt-out beats policy", jobset(map[string]string{hbv1.GangAnnotation: "false"}, rjob("a", 1, nil, nil, plain)), policies(t, ptr.To(true), ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, IsGang(tc.js, ns, tc.pols)) })
	}
}

func TestDesiredOwnKeysFirstThenPolicy(t *testing.T) {
	spec := corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1"), nil)}}
	js := jobset(nil, rjob("a", 2, nil, nil, spec))
	js.Namespace, js.UID = "ns", "uid-1"
	pols := policies(t, nil, "policy-q")

	pg, _, err := Desired(js, defaults.Namespace{Name: "ns"}, pols, Admission{})
	require.NoError(t, err)
	assert.Equal(t, "js", pg.Name)
	assert.Equal(t, int32(2), pg.Spec.MinMember)
	assert.Equal(t, "policy-q", pg.Spec.Queue)
	assert.Equal(t, "batch-low", pg.Spec.PriorityClassName)
	require.Len(t, pg.OwnerReferences, 1)
	assert.True(t, *pg.OwnerReferences[0].Controller)
	assertResources(t, rl("cpu", "2"), *pg.Spec.MinResources)

	js.Annotations = map[string]string{defaults.QueueNameAnnotation: "own-q", defaults.NetworkTopologyModeAnnotation: "hard",
		defaults.NetworkTopologyHighestTierAnnotation: "2"}
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "own-pc"
	pg2, _, err := Desired(js, defaults.Namespace{Name: "ns"}, pols, Admission{})
	require.NoError(t, err)
	assert.Equal(t, "own-q", pg2.Spec.Queue)
	assert.Equal(t, "own-pc", pg2.Spec.PriorityClassName)
	require.NotNil(t, pg2.Spec.NetworkTopology)
	assert.Equal(t, 2, *pg2.Spec.NetworkTopology.HighestTierAllowed)

	// The same desired state is up to date with itself; a changed minMember or a foreign owner is not.
	assert.True(t, UpToDate(pg2, pg2.DeepCopy()))
	other := pg2.DeepCopy()
	other.Spec.MinMember = 3
	assert.False(t, UpToDate(pg2, other))
	other = pg2.DeepCopy()
	other.OwnerReferences[0].UID = "someone-else"
	assert.False(t, UpToDate(pg2, other))

	js.Annotations[defaults.NetworkTopologyHighestTierAnnotation] = "top"
	_, _, err = Desired(js, defaults.Namespace{Name: "ns"}, pols, Admission{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), defaults.NetworkTopologyHighestTierAnnotation)

	// A mode the PodGroup CRD's enum refuses is an error naming the annotation, not an apply that
	// fails on every retry.
	js.Annotations[defaults.NetworkTopologyHighestTierAnnotation] = "2"
	js.Annotations[defaults.NetworkTopologyModeAnnotation] = "strict"
	_, _, err = Desired(js, defaults.Namespace{Name: "ns"}, pols, Admission{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), defaults.NetworkTopologyModeAnnotation+`="strict" is not "hard" or "soft"`)
}

func TestFinished(t *testing.T) {
	js := jobset(nil)
	assert.False(t, Finished(js))
	js.Status.TerminalState = string(jobsetv1alpha2.JobSetFailed)
	assert.True(t, Finished(js))
	js = jobset(nil)
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue}}
	assert.True(t, Finished(js))
}

// A policy's tier bound is left out of the PodGroup of a JobSet whose pod template pins its pods to
// nodes (the nodes might not share a HyperNode of that tier, and the gang would wait for good); the
// Skip names both, and the JobSet's own topology annotations still apply.
func TestDesiredSkipsPolicyTopologyForPinnedPods(t *testing.T) {
	p, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Queue: "q",
			NetworkTopology: &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyHard, HighestTierAllowed: ptr.To(int32(1))}}}}})
	require.NoError(t, err)
	ns := defaults.Namespace{Name: "ns"}
	spec := corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "1"), nil)}}

	free := jobset(nil, rjob("a", 2, nil, nil, spec))
	pg, skips, err := Desired(free, ns, p, Admission{})
	require.NoError(t, err)
	assert.Empty(t, skips)
	require.NotNil(t, pg.Spec.NetworkTopology, "an unpinned gang gets the policy's topology")
	assert.Equal(t, 1, *pg.Spec.NetworkTopology.HighestTierAllowed)

	pinnedSpec := spec
	pinnedSpec.NodeSelector = map[string]string{corev1.LabelHostname: "node-7"}
	pinned := jobset(nil, rjob("a", 1, nil, nil, spec), rjob("b", 1, nil, nil, pinnedSpec))
	pg, skips, err = Desired(pinned, ns, p, Admission{})
	require.NoError(t, err)
	assert.Nil(t, pg.Spec.NetworkTopology, "a gang pinned to nodes must not get the policy's tier bound")
	assert.Equal(t, "q", pg.Spec.Queue, "the policy's other defaults still apply")
	require.Len(t, skips, 1)
	assert.Equal(t, `spec.networkTopology (networkTopology hard, highestTierAllowed 1 from WorkloadPolicy p) was not defaulted: `+
		`it would contradict JobSet spec.replicatedJobs[1].template.spec.template.spec.nodeSelector[kubernetes.io/hostname] "node-7"`, skips[0].String())

	pinned.Annotations = map[string]string{defaults.NetworkTopologyModeAnnotation: "soft"}
	pg, skips, err = Desired(pinned, ns, p, Admission{})
	require.NoError(t, err)
	assert.Empty(t, skips, "the JobSet's own topology is the user's choice, not a default")
	require.NotNil(t, pg.Spec.NetworkTopology)
	assert.Equal(t, "soft", string(pg.Spec.NetworkTopology.Mode))
}
