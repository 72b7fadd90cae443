package workload

import (
	"time"

	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// volcanoJob: a Volcano Job is a gang whose PodGroup Volcano's job controller makes (controlled by
// the Job); its deadline is hyperbatch's annotation, ended by an AbortJob Command; its TTL is native.
var volcanoJob = Workload{
	Kind:      defaults.KindVolcanoJob,
	Title:     "Volcano Job",
	Admission: Admission{Uncovered: "its defaults depend on each task's pod template and on Volcano's own webhook's queue default, and its carry-over matches tasks by name; not yet generated"},
	Gang: &Gang{MadeBy: MadeByVolcano, OwnerAPIVersion: batchv1alpha1.SchemeGroupVersion.String(), OwnerKind: "Job",
		MinMember: "spec.minAvailable (Volcano's)",
		SubGroups: "a task's partitionPolicy (Volcano v1.14), restored into its PodGroup by hyperbatch's PodGroup admission"},
	Lifecycle: &Lifecycle{
		Deadline: InAnnotation, TTL: InNativeField, End: EndAbortCommand,
		Started: typed(VCJobStart),
		FinishedAt: typed(func(j *batchv1alpha1.Job) *time.Time {
			t, _ := VCJobFinished(j)
			return t
		}),
		Suspended: typed(func(j *batchv1alpha1.Job) bool { return vcjobSuspended(j.Status.State.Phase) }),
		NativeTTL: typed(func(j *batchv1alpha1.Job) *int32 { return j.Spec.TTLSecondsAfterFinished }),
	},
	CLI: CLI{Name: "vcjob", Aliases: []string{"vcjob", "vj"}, Why: true, Explain: true},
}

// vcjobSuspended reports whether a Volcano Job phase is the suspended state: `vcctl job suspend`
// issues an AbortJob command (Aborting, then Aborted) and `vcctl job resume` a ResumeJob command.
func vcjobSuspended(p batchv1alpha1.JobPhase) bool {
	return p == batchv1alpha1.Aborting || p == batchv1alpha1.Aborted
}

// VCJobEnding reports whether a Volcano Job phase is final or on its way there: no deadline applies.
func VCJobEnding(p batchv1alpha1.JobPhase) bool {
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
	if vcjobSuspended(p) || VCJobEnding(p) {
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
