package workload

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// trainJob: Kubeflow Trainer's TrainJob (v2.3.0), read as an unstructured object (Trainer's Go module
// is not a dependency: docs/design.md). Admission writes the queue into a runtimePatches entry, the
// policy's deadline into the native spec.activeDeadlineSeconds and the TTL annotation; it keeps its
// webhook in policy mode. The pods are scheduled through the JobSet Trainer makes (a JobSet gang) or,
// with the runtime's podGroupPolicy.volcano, Trainer's own PodGroup (docs/podgroup.md).
var trainJob = Workload{
	Kind:  defaults.KindTrainJob,
	Title: "TrainJob",
	Admission: Admission{Uncovered: "its queue is an entry of spec.runtimePatches (a list keyed by manager) and the queue a runtime's template names " +
		"is read from the runtime, which the generated policies cannot do"},
	// Its deadline is native (Trainer enforces it, ending it Failed/DeadlineExceeded); its TTL is
	// hyperbatch's annotation, which controllers/lifecycle enforces (Trainer v2.3.0 has none).
	Lifecycle: &Lifecycle{
		Deadline: InNativeField, TTL: InAnnotation,
		Started:    typed(TrainJobStart),
		FinishedAt: typed(TrainJobFinishedAt),
		Suspended:  typed(TrainJobSuspended),
	},
	// With the runtime's podGroupPolicy.volcano Trainer makes the PodGroup (the TrainJob's name,
	// controlled by the TrainJob); without it the JobSet Trainer makes (the TrainJob's name) is
	// hyperbatch's gang.
	Gang: &Gang{MadeBy: MadeByTrainer, OwnerAPIVersion: defaults.TrainJobGVK.GroupVersion().String(), OwnerKind: defaults.TrainJobGVK.Kind,
		SameName: true, MinMember: "every pod of the TrainJob (Trainer's count, podGroupPolicy.volcano); without it, its JobSet's gang", Via: defaults.KindJobSet,
		// The TrainJob's own annotations (Trainer does not copy them onto the JobSet): per N ranks is
		// hyperbatch.dev/subgroup-by: pods with subgroup-pods N (a node's rank is its completion
		// index), per node group each Job of a replicatedJob (replica).
		SubGroups: "the TrainJob's annotations hyperbatch.dev/subgroup-by (pods with hyperbatch.dev/subgroup-pods N: each N nodes in rank order; replica: each Job), " +
			"-network-topology-mode and -highest-tier, applied to its JobSet's replicatedJobs and written into Trainer's PodGroup (podGroupPolicy.volcano) or its JobSet's",
		SubGroupAnnotations: true},
	CLI: CLI{Name: "trainjob", Aliases: []string{"tj"}, Why: true, Explain: true},
}

// TrainJob condition types (Trainer v2.3.0's trainer.kubeflow.org/v1alpha1).
const (
	TrainJobComplete           = "Complete"
	TrainJobFailed             = "Failed"
	TrainJobSuspendedCondition = "Suspended"
)

// trainJobConditions are the TrainJob's status.conditions.
func trainJobConditions(tj *unstructured.Unstructured) []metav1.Condition {
	list, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		c := metav1.Condition{}
		c.Type, _ = m["type"].(string)
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = metav1.NewTime(t)
			}
		}
		out = append(out, c)
	}
	return out
}

// TrainJobFinishedAt is the lastTransitionTime of a TrainJob's Complete or Failed condition; nil while
// it runs.
func TrainJobFinishedAt(tj *unstructured.Unstructured) *time.Time {
	return trueConditionTime(trainJobConditions(tj), TrainJobComplete, TrainJobFailed)
}

// TrainJobSuspended says whether spec.suspend is true.
func TrainJobSuspended(tj *unstructured.Unstructured) bool {
	s, _, _ := unstructured.NestedBool(tj.Object, "spec", "suspend")
	return s
}

// TrainJobStart is when a running TrainJob's deadline clock started, as Trainer v2.3.0 counts it (the
// clock restarts in full on resume): its creation, or the lastTransitionTime of its Suspended
// condition turning False, whichever is later. nil while it is suspended or finished.
func TrainJobStart(tj *unstructured.Unstructured) *time.Time {
	if TrainJobFinishedAt(tj) != nil || TrainJobSuspended(tj) {
		return nil
	}
	t := tj.GetCreationTimestamp().Time
	for _, c := range trainJobConditions(tj) {
		if c.Type != TrainJobSuspendedCondition {
			continue
		}
		if c.Status == metav1.ConditionTrue {
			return nil
		}
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	return &t
}
