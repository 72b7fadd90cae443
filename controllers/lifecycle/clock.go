package lifecycle

import (
	"fmt"
	"strconv"
	"time"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// seconds reads a lifecycle annotation as a number of seconds. ok is false when the annotation is
// absent; err is set when it is present but not an integer >= min (the webhook rejects such values;
// an object admitted without the webhook gets a Warning Event instead of an action).
func seconds(obj metav1.Object, key string, min int64) (d time.Duration, ok bool, err error) {
	v, has := obj.GetAnnotations()[key]
	if !has {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || n < min {
		return 0, true, fmt.Errorf("annotation %s=%q is not an integer number of seconds >= %d; fix it by recreating the object with a valid value", key, v, min)
	}
	// Cap far beyond any real deadline so the multiplication cannot overflow.
	const maxSeconds = int64(100 * 365 * 24 * 3600)
	return time.Duration(min64(n, maxSeconds)) * time.Second, true, nil
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// ActiveDeadline is the workload's hyperbatch.dev/active-deadline-seconds (>= 1).
func ActiveDeadline(obj metav1.Object) (time.Duration, bool, error) {
	return seconds(obj, hbv1.ActiveDeadlineSecondsAnnotation, 1)
}

// TTLAfterFinished is the workload's hyperbatch.dev/ttl-seconds-after-finished (>= 0).
func TTLAfterFinished(obj metav1.Object) (time.Duration, bool, error) {
	return seconds(obj, hbv1.TTLSecondsAfterFinishedAnnotation, 0)
}

// HyperJobStart is when a HyperJob's deadline clock started: its creation. HyperJobs have no
// suspend, so the clock never resets. nil when the HyperJob is finished.
func HyperJobStart(hj *trainingv1alpha1.HyperJob) *time.Time {
	if hyperjobstatus.IsFinished(&hj.Status) {
		return nil
	}
	t := hj.CreationTimestamp.Time
	return &t
}

// HyperJobFinishedAt is the lastTransitionTime of a HyperJob's terminal condition (Completed or
// Failed True); nil while it runs.
func HyperJobFinishedAt(hj *trainingv1alpha1.HyperJob) *time.Time {
	return trueConditionTime(hj.Status.Conditions, hyperjobstatus.ConditionCompleted, hyperjobstatus.ConditionFailed)
}

func trueConditionTime(conds []metav1.Condition, types ...string) *time.Time {
	for _, t := range types {
		if c := apimeta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionTrue {
			tt := c.LastTransitionTime.Time
			return &tt
		}
	}
	return nil
}

// JobSetFinishedAt is the lastTransitionTime of a JobSet's Completed or Failed condition; nil while
// it runs.
func JobSetFinishedAt(js *jobsetv1alpha2.JobSet) *time.Time {
	return trueConditionTime(js.Status.Conditions, string(jobsetv1alpha2.JobSetCompleted), string(jobsetv1alpha2.JobSetFailed))
}

// JobSetStart is when a running JobSet's deadline clock started, following the Kubernetes Job rule
// (status.startTime is reset when a suspended Job resumes): its creation, or the lastTransitionTime
// of its Suspended condition turning False (the JobSet controller's ResumeJobs), whichever is later.
// nil while the JobSet is suspended (spec.suspend, or the Suspended condition still True) or
// finished: no clock runs.
func JobSetStart(js *jobsetv1alpha2.JobSet) *time.Time {
	if JobSetFinishedAt(js) != nil {
		return nil
	}
	if js.Spec.Suspend != nil && *js.Spec.Suspend {
		return nil
	}
	t := js.CreationTimestamp.Time
	if c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetSuspended)); c != nil {
		if c.Status == metav1.ConditionTrue {
			return nil // resumed in spec, but the JobSet controller has not resumed the Jobs yet
		}
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return &t
}

// vcjobSuspended reports whether a Volcano Job phase is the suspended state: `vcctl job suspend`
// issues an AbortJob command (Aborting, then Aborted) and `vcctl job resume` a ResumeJob command.
func vcjobSuspended(p batchv1alpha1.JobPhase) bool {
	return p == batchv1alpha1.Aborting || p == batchv1alpha1.Aborted
}

// vcjobEnding reports whether a Volcano Job phase is final or on its way there: no deadline applies.
func vcjobEnding(p batchv1alpha1.JobPhase) bool {
	switch p {
	case batchv1alpha1.Completing, batchv1alpha1.Completed, batchv1alpha1.Failed,
		batchv1alpha1.Terminating, batchv1alpha1.Terminated:
		return true
	}
	return false
}

// VCJobFinished reports whether a Volcano Job is finished (Completed, Failed or Terminated) and when,
// the phase's lastTransitionTime, which is what Volcano's garbage collector counts its TTL from.
func VCJobFinished(j *batchv1alpha1.Job) (*time.Time, bool) {
	switch j.Status.State.Phase {
	case batchv1alpha1.Completed, batchv1alpha1.Failed, batchv1alpha1.Terminated:
		t := j.Status.State.LastTransitionTime.Time
		return &t, true
	}
	return nil, false
}

// VCJobStart is when a running Volcano Job's deadline clock started: its creation, or, when it was
// suspended (Aborting/Aborted) and resumed, the transition out of the last suspended phase. Volcano
// appends one entry to status.conditions per phase change, with its lastTransitionTime, so the resume
// time is read from that history. nil while suspended or ending.
func VCJobStart(j *batchv1alpha1.Job) *time.Time {
	p := j.Status.State.Phase
	if vcjobSuspended(p) || vcjobEnding(p) {
		return nil
	}
	t := j.CreationTimestamp.Time
	conds := j.Status.Conditions
	for i := len(conds) - 1; i >= 0; i-- {
		if !vcjobSuspended(conds[i].Status) {
			continue
		}
		// conds[i] is the last suspended phase; the entry after it is the resume.
		if i+1 < len(conds) && conds[i+1].LastTransitionTime != nil && conds[i+1].LastTransitionTime.After(t) {
			t = conds[i+1].LastTransitionTime.Time
		}
		break
	}
	return &t
}
