package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestHyperJobClock(t *testing.T) {
	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(0))}}
	assert.Equal(t, at(0), *HyperJobStart(hj))
	assert.Nil(t, HyperJobFinishedAt(hj))
	hj.Status.Conditions = []metav1.Condition{{Type: hyperjobstatus.ConditionCompleted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(50))}}
	assert.Nil(t, HyperJobStart(hj))
	assert.Equal(t, at(50), *HyperJobFinishedAt(hj))
}

func TestJobSetClock(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(0))}}
	assert.Equal(t, at(0), *JobSetStart(js), "created running: the clock starts at creation")

	js.Spec.Suspend = ptr.To(true)
	assert.Nil(t, JobSetStart(js), "suspended: no clock")

	js.Spec.Suspend = ptr.To(false)
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetSuspended), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(1))}}
	assert.Nil(t, JobSetStart(js), "resumed in spec but not yet by the JobSet controller: no clock")

	js.Status.Conditions[0].Status = metav1.ConditionFalse
	js.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at(100))
	assert.Equal(t, at(100), *JobSetStart(js), "resumed: the clock restarts at the resume")

	js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(200))})
	assert.Nil(t, JobSetStart(js))
	assert.Equal(t, at(200), *JobSetFinishedAt(js))
}

func TestVCJobClock(t *testing.T) {
	cond := func(p batchv1alpha1.JobPhase, s int) batchv1alpha1.JobCondition {
		tt := metav1.NewTime(at(s))
		return batchv1alpha1.JobCondition{Status: p, LastTransitionTime: &tt}
	}
	j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(0))}}
	j.Status.State.Phase = batchv1alpha1.Running
	j.Status.Conditions = []batchv1alpha1.JobCondition{cond(batchv1alpha1.Pending, 1), cond(batchv1alpha1.Running, 5)}
	assert.Equal(t, at(0), *VCJobStart(j))

	// Suspended (vcctl job suspend = AbortJob): no clock.
	j.Status.Conditions = append(j.Status.Conditions, cond(batchv1alpha1.Aborting, 10), cond(batchv1alpha1.Aborted, 11))
	j.Status.State.Phase = batchv1alpha1.Aborted
	assert.Nil(t, VCJobStart(j))

	// Resumed: the clock restarts at the transition out of Aborted.
	j.Status.Conditions = append(j.Status.Conditions, cond(batchv1alpha1.Restarting, 300), cond(batchv1alpha1.Pending, 301), cond(batchv1alpha1.Running, 305))
	j.Status.State.Phase = batchv1alpha1.Running
	assert.Equal(t, at(300), *VCJobStart(j))

	j.Status.State.Phase = batchv1alpha1.Completed
	j.Status.State.LastTransitionTime = metav1.NewTime(at(400))
	assert.Nil(t, VCJobStart(j))
	fin, ok := VCJobFinished(j)
	assert.True(t, ok)
	assert.Equal(t, at(400), *fin)
}
