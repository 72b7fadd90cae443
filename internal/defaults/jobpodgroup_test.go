package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// volcanoMadePodGroup is the PodGroup Volcano v1.14's job controller creates for job: the Job's
// queue and priorityClassName, its topology's mode and highestTierAllowed (not highestTierName),
// and a controller reference to the Job.
func volcanoMadePodGroup(job *batchv1alpha1.Job) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-uid", Namespace: job.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 2, Queue: job.Spec.Queue, PriorityClassName: job.Spec.PriorityClassName}}
	if nt := job.Spec.NetworkTopology; nt != nil {
		pg.Spec.NetworkTopology = &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.NetworkTopologyMode(nt.Mode), HighestTierAllowed: nt.HighestTierAllowed}
	}
	return pg
}

// A Volcano Job's PodGroup follows its Job: Volcano's "default" queue is kept when the Job has it
// (PodGroup would give it the policy's queue), the highestTierName Volcano dropped comes back, and
// no policy default is applied.
func TestVolcanoJobPodGroupFollowsItsJob(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "a", UID: "u1"}, Spec: batchv1alpha1.JobSpec{
		Queue: "default", NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierName: "block"}}}
	pg := volcanoMadePodGroup(job)
	require.Equal(t, VolcanoJobOwner(pg).Name, "train")
	res := VolcanoJobPodGroup(pg, job)
	assert.Equal(t, "default", pg.Spec.Queue, "the PodGroup keeps its Job's queue")
	assert.Empty(t, pg.Spec.PriorityClassName, "no policy default")
	require.NotNil(t, pg.Spec.NetworkTopology)
	assert.Equal(t, schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierName: "block"}, *pg.Spec.NetworkTopology)
	assert.Equal(t, []string{"spec.networkTopology.highestTierName"}, res.Paths())
	assert.Equal(t, "vcjob:train/networkTopology", pg.Annotations[hbv1.DefaultedByAnnotation])
	assert.Equal(t, "Volcano Job train (its spec: the PodGroup follows its Job)", res.Fills[0].Describe())
	assert.Empty(t, res.Policy)

	// Applying it again changes nothing.
	again := VolcanoJobPodGroup(pg, job)
	assert.False(t, again.Changed())

	// The standalone rule would have moved it to the policy's queue: that is what a Job's PodGroup
	// must not get.
	alone := volcanoMadePodGroup(job)
	PodGroup(alone, nsA, mustPolicies(t, teamA()))
	assert.Equal(t, "team-a", alone.Spec.Queue)
}

// What the PodGroup lacks is filled from the Job; what it sets is kept.
func TestVolcanoJobPodGroupFillsOnlyUnset(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{
		Queue: "team-a", PriorityClassName: "batch-high",
		NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.SoftNetworkTopologyMode, HighestTierAllowed: ptr.To(2), HighestTierName: "spine"}}}
	bare := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{Queue: "default"}}
	res := VolcanoJobPodGroup(bare, job)
	assert.Equal(t, []string{"spec.queue", "spec.priorityClassName", "spec.networkTopology"}, res.Paths())
	assert.Equal(t, "team-a", bare.Spec.Queue)
	assert.Equal(t, "batch-high", bare.Spec.PriorityClassName)
	assert.Equal(t, schedulingv1beta1.NetworkTopologySpec{Mode: "soft", HighestTierAllowed: ptr.To(2), HighestTierName: "spine"}, *bare.Spec.NetworkTopology)
	*job.Spec.NetworkTopology.HighestTierAllowed = 3
	assert.Equal(t, 2, *bare.Spec.NetworkTopology.HighestTierAllowed, "the PodGroup does not share the Job's pointers")

	own := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{Queue: "research", PriorityClassName: "low",
		NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "hard"}}}
	res = VolcanoJobPodGroup(own, job)
	assert.False(t, res.Changed(), "a PodGroup's own values are kept (a different mode is not the Job's copy)")
	assert.Equal(t, "research", own.Spec.Queue)
	assert.Empty(t, own.Spec.NetworkTopology.HighestTierName)

	assert.False(t, VolcanoJobPodGroup(nil, job).Changed())
	assert.False(t, VolcanoJobPodGroup(bare, nil).Changed())
	assert.Nil(t, VolcanoJobOwner(bare))
}
