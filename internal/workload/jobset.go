package workload

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// jobSet: a JobSet is a gang whose PodGroup hyperbatch's gang controller makes (same name,
// controlled by the JobSet); its deadline is hyperbatch's annotation, ended by a Failed condition
// the JobSet controller honours; its TTL is native.
var jobSet = Workload{
	Kind:      defaults.KindJobSet,
	Title:     "JobSet",
	Admission: Admission{Uncovered: "its defaults copy the queue into every replicated Job's pod template and derive the PodGroup's name and gang from the JobSet; not yet generated"},
	Gang: &Gang{MadeBy: MadeByHyperbatch, OwnerAPIVersion: jobsetv1alpha2.GroupVersion.String(), OwnerKind: "JobSet", SameName: true,
		MinMember: "every pod of every replicated Job (replicas × parallelism)",
		SubGroups: "annotations hyperbatch.dev/subgroup-by (replica: each Job; pods with hyperbatch.dev/subgroup-pods N: each N pods in completion-index order), " +
			"hyperbatch.dev/subgroup-network-topology-mode and -highest-tier, written into its PodGroup",
		SubGroupAnnotations: true},
	Lifecycle: &Lifecycle{
		Deadline: InAnnotation, TTL: InNativeField, End: EndFailedCondition,
		Started:    typed(JobSetStart),
		FinishedAt: typed(JobSetFinishedAt),
		Suspended:  typed(JobSetSuspended),
		NativeTTL:  typed(func(js *jobsetv1alpha2.JobSet) *int32 { return js.Spec.TTLSecondsAfterFinished }),
	},
	CLI: CLI{Name: "jobset", Aliases: []string{"js"}, Why: true, Explain: true},
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

// JobSetFinished says whether the JobSet ended Completed or Failed (status.terminalState, or a true
// Completed/Failed condition).
func JobSetFinished(js *jobsetv1alpha2.JobSet) bool {
	switch js.Status.TerminalState {
	case string(jobsetv1alpha2.JobSetCompleted), string(jobsetv1alpha2.JobSetFailed):
		return true
	}
	return JobSetFinishedAt(js) != nil
}

// JobSetSuspended says whether spec.suspend is true.
func JobSetSuspended(js *jobsetv1alpha2.JobSet) bool { return ptr.Deref(js.Spec.Suspend, false) }

// JobSetStart is when a running JobSet's deadline clock started, following the Kubernetes Job rule
// (status.startTime is reset when a suspended Job resumes): its creation, or the lastTransitionTime
// of its Suspended condition turning False (the JobSet controller's ResumeJobs), whichever is later.
// nil while the JobSet is suspended (spec.suspend, or the Suspended condition still True) or
// finished: no clock runs.
func JobSetStart(js *jobsetv1alpha2.JobSet) *time.Time {
	if JobSetFinishedAt(js) != nil || JobSetSuspended(js) {
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
