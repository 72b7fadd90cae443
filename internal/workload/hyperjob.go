package workload

import (
	"time"

	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// hyperJob: a HyperJob is no gang of its own (each child Volcano Job is one); its deadline and TTL
// are hyperbatch's annotations, the deadline ended by a Failed condition and its children's abort.
// It has no suspend.
var hyperJob = Workload{
	Kind:      defaults.KindHyperJob,
	Title:     "HyperJob",
	Admission: Admission{Uncovered: "its defaults follow the replicated Volcano Jobs' templates; not yet generated"},
	Lifecycle: &Lifecycle{
		Deadline: InAnnotation, TTL: InAnnotation, End: EndFailedCondition,
		Started:    typed(HyperJobStart),
		FinishedAt: typed(HyperJobFinishedAt),
		Suspended:  func(Object) bool { return false },
	},
	CLI: CLI{Name: "hyperjob", Aliases: []string{"hj"}, Explain: true},
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
