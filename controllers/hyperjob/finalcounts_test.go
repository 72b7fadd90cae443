package hyperjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// withFrozen writes fp into the HyperJob's annotation, as freezeFinishedCounts does.
func withFrozen(t *testing.T, hj interface{ SetAnnotations(map[string]string) }, fp finishedPods) {
	t.Helper()
	v, err := fp.encode()
	require.NoError(t, err)
	hj.SetAnnotations(map[string]string{hbv1.FinishedChildPodsAnnotation: v})
}

// The case: children report fewer succeeded pods after they finished (Volcano deletes them),
// and a deleted child reports nothing. Counts frozen at the first finished sight stand.
func TestFinalCountsSurviveVolcanoLoweringThem(t *testing.T) {
	hj := twoByTwo()
	p := plan(t, hj)
	seenFinished := jobsOf(vcjob("hj-a-0", batchv1alpha1.Completed, 0, 4), vcjob("hj-a-1", batchv1alpha1.Running, 4, 0),
		vcjob("hj-b-0", batchv1alpha1.Failed, 0, 1))
	seenFinished["hj-b-0"].Status.Failed = 3

	fp, changed := freezeFinished(hj, finishedPods{}, p, seenFinished, nil)
	require.True(t, changed)
	assert.Equal(t, finishedPods{"a": {"0": {4, 0}}, "b": {"0": {1, 3}}}, fp)
	again, changed := freezeFinished(hj, fp, p, seenFinished, nil)
	assert.False(t, changed, "a second pass over the same children changes nothing")
	assert.Equal(t, fp, again)
	withFrozen(t, hj, fp)

	// Later: hj-a-0's pods are gone (Volcano reports 0), hj-b-0 is deleted, hj-a-1 still runs.
	later := jobsOf(vcjob("hj-a-0", batchv1alpha1.Completed, 0, 0), vcjob("hj-a-1", batchv1alpha1.Running, 4, 0))
	hj.Status.ReplicatedJobsStatus = []trainingv1alpha1.ReplicatedJobStatus{{Name: "b", JobStates: map[string]batchv1alpha1.JobState{"hj-b-0": {Phase: batchv1alpha1.Failed}}}}
	st, _ := ComputeStatus(hj, p, later)
	a, b := st.ReplicatedJobsStatus[0], st.ReplicatedJobsStatus[1]
	assert.Equal(t, [3]int32{4, 4, 0}, [3]int32{a.Running, a.Succeeded, a.Failed}, "hj-a-0's frozen 4 succeeded plus hj-a-1's 4 running")
	assert.Equal(t, [2]int32{1, 3}, [2]int32{b.Succeeded, b.Failed}, "the deleted hj-b-0 keeps its final counts")
	assert.Equal(t, batchv1alpha1.Failed, b.JobStates["hj-b-0"].Phase)

	// Without the frozen counts (today's behaviour) the sums fall: the test's premise.
	hj.Annotations = nil
	st, _ = ComputeStatus(hj, p, later)
	assert.Equal(t, int32(0), st.ReplicatedJobsStatus[0].Succeeded)
}

// Entries of children that leave the plan are dropped; a refused plan drops nothing.
func TestFinalCountsFollowThePlan(t *testing.T) {
	hj := twoByTwo()
	fp := finishedPods{"a": {"0": {2, 0}, "1": {2, 0}}, "gone": {"0": {1, 1}}}
	hj.Spec.ReplicatedJobs[0].Replicas = 1
	out, changed := freezeFinished(hj, fp, plan(t, hj), nil, nil)
	assert.True(t, changed)
	assert.Equal(t, finishedPods{"a": {"0": {2, 0}}}, out)
	assert.Len(t, fp["a"], 2, "the input is not modified")

	refused := &Plan{Refusal: &Refusal{Condition: ConditionSpecInvalid}}
	out, changed = freezeFinished(hj, fp, refused, nil, nil)
	assert.False(t, changed)
	assert.Equal(t, fp, out)

	v, err := finishedPods{}.encode()
	require.NoError(t, err)
	assert.Empty(t, v, "nothing frozen: no annotation")
}

func TestReadFinishedPodsRefusesGarbage(t *testing.T) {
	hj := twoByTwo()
	hj.Annotations = map[string]string{hbv1.FinishedChildPodsAnnotation: "{not json"}
	fp, err := readFinishedPods(hj)
	assert.Error(t, err)
	assert.Empty(t, fp)
	_, ok := childIndex("hj", "a", "hj-a-x")
	assert.False(t, ok)
	idx, ok := childIndex("hj", "a", "hj-a-12")
	assert.True(t, ok)
	assert.Equal(t, "12", idx)
}
