package hyperjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

// TestMustKeep: a deleted child keeps its finalizer only while it is finished, in the plan, and not
// yet recorded as finished by a HyperJob that still acts on its children.
func TestMustKeep(t *testing.T) {
	live := twoByTwo()
	done := twoByTwo()
	done.Status.Conditions = []metav1.Condition{{Type: ConditionCompleted, Status: metav1.ConditionTrue}}
	deleting := twoByTwo()
	deleting.DeletionTimestamp = &metav1.Time{}
	rec := map[string]batchv1alpha1.JobState{"hj-a-1": {Phase: batchv1alpha1.Completed}, "hj-a-2": {Phase: batchv1alpha1.Running}}
	inPlan := map[string]bool{"hj-a-0": true, "hj-a-1": true, "hj-a-2": true}
	for _, tc := range []struct {
		name    string
		hj      *trainingv1alpha1.HyperJob
		job     *batchv1alpha1.Job
		desired map[string]bool
		keep    bool
	}{
		{"finished, unrecorded", live, vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), nil, true},
		{"failed, unrecorded", live, vcjob("hj-a-0", batchv1alpha1.Failed, 0, 0), inPlan, true},
		{"finished, recorded as running", live, vcjob("hj-a-2", batchv1alpha1.Completed, 0, 1), inPlan, true},
		{"finished, recorded", live, vcjob("hj-a-1", batchv1alpha1.Completed, 0, 1), inPlan, false},
		{"unfinished", live, vcjob("hj-a-0", batchv1alpha1.Running, 1, 0), nil, false},
		{"finished, out of the plan", live, vcjob("hj-a-9", batchv1alpha1.Completed, 0, 1), inPlan, false},
		{"HyperJob finished", done, vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), nil, false},
		{"HyperJob deleted", deleting, vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), nil, false},
		{"HyperJob gone", nil, vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), nil, false},
	} {
		assert.Equal(t, tc.keep, mustKeep(tc.hj, rec, tc.desired, tc.job), tc.name)
	}
}

// TestComputeStatusRefusalKeepsFinishedRecords: while the spec is refused, the recorded final state
// of a finished child that is gone stays in the status, so lifting the refusal never recreates it.
func TestComputeStatusRefusalKeepsFinishedRecords(t *testing.T) {
	hj := twoByTwo()
	st, _ := ComputeStatus(hj, plan(t, hj), jobsOf(vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), vcjob("hj-a-1", batchv1alpha1.Running, 1, 0)))
	hj.Status = st
	hj.Spec.ReplicatedJobs[0].SplitPolicy = &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeAuto}
	// hj-a-0 is gone now.
	st, _ = ComputeStatus(hj, plan(t, hj), jobsOf(vcjob("hj-a-1", batchv1alpha1.Running, 1, 0)))
	require.Len(t, st.ReplicatedJobsStatus, 2)
	assert.Equal(t, batchv1alpha1.Completed, st.ReplicatedJobsStatus[0].JobStates["hj-a-0"].Phase)
	hj.Status = st
	hj.Spec.ReplicatedJobs[0].SplitPolicy = nil
	st, _ = ComputeStatus(hj, plan(t, hj), jobsOf(vcjob("hj-a-1", batchv1alpha1.Running, 1, 0)))
	assert.Equal(t, batchv1alpha1.Completed, st.ReplicatedJobsStatus[0].JobStates["hj-a-0"].Phase, "record kept after the refusal is lifted")
}
