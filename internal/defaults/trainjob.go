package defaults

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1, as of Trainer v2.3.0) is read and
// written as an unstructured object through the accessors below: importing Trainer's Go module would
// raise the product's sigs.k8s.io/jobset (docs/design.md).

// TrainJobGVK is the TrainJob version hyperbatch admits.
var TrainJobGVK = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}

// TrainJobRuntimePatchManager is the manager of the runtimePatches entry hyperbatch's admission writes
// (Trainer merges every entry's template metadata into the JobSet's and reads the Volcano queue
// from there, v2.2+).
const TrainJobRuntimePatchManager = "hyperbatch.dev/admission"

// NewTrainJob returns an empty TrainJob.
func NewTrainJob() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(TrainJobGVK)
	return u
}

// TrainJobRuntimePatches are the TrainJob's spec.runtimePatches entries (objects only).
func TrainJobRuntimePatches(tj *unstructured.Unstructured) []map[string]any {
	list, _, _ := unstructured.NestedSlice(tj.Object, "spec", "runtimePatches")
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// TrainJobPatchQueue is the Volcano queue a runtimePatches entry writes into the JobSet template's
// annotations ("" when it writes none).
func TrainJobPatchQueue(patch map[string]any) (string, bool) {
	q, ok, _ := unstructured.NestedString(patch, "trainingRuntimeSpec", "template", "metadata", "annotations", QueueNameAnnotation)
	return q, ok
}

// TrainJobQueuePath is the path of runtimePatches entry i's queue annotation.
func TrainJobQueuePath(i int) string {
	return "spec.runtimePatches[" + strconv.Itoa(i) + "].trainingRuntimeSpec.template.metadata.annotations[" + QueueNameAnnotation + "]"
}

// TrainJobQueue is the queue the TrainJob's runtimePatches give Trainer (the last entry that sets
// one wins, as Trainer merges them in order) and the index of that entry; -1 when none sets one.
func TrainJobQueue(tj *unstructured.Unstructured) (queue string, index int) {
	index = -1
	for i, p := range TrainJobRuntimePatches(tj) {
		if q, ok := TrainJobPatchQueue(p); ok && NormalizeQueue(q) != "" {
			queue, index = q, i
		}
	}
	return queue, index
}

// TrainJobActiveDeadlineSeconds is spec.activeDeadlineSeconds (0: unset).
func TrainJobActiveDeadlineSeconds(tj *unstructured.Unstructured) int64 {
	v, _, _ := unstructured.NestedInt64(tj.Object, "spec", "activeDeadlineSeconds")
	return v
}

// TrainJob fills a TrainJob the way Trainer v2.3.0 reads it:
//   - the queue: a spec.runtimePatches entry of manager hyperbatch.dev/admission whose JobSet template
//     annotations carry scheduling.volcano.sh/queue-name (Trainer copies them onto the JobSet, and its
//     Volcano plugin reads the PodGroup's queue from them), when no entry names a queue;
//   - spec.activeDeadlineSeconds from the policy (Trainer enforces it; immutable once set);
//   - hyperbatch.dev/ttl-seconds-after-finished from the policy (controllers/lifecycle enforces it).
//
// schedulerName, priorityClassName and the topology have no place in a TrainJob (runtimePatches
// cannot set them): the JobSet and PodGroup Trainer makes are admitted with them (docs/webhooks.md).
// TrainJobWithRuntime also keeps a queue the referenced runtime's template names.
func TrainJob(tj *unstructured.Unstructured, ns Namespace, pols *Policies) Result {
	return TrainJobWithRuntime(tj, "", ns, pols)
}

// TrainJobWithRuntime is TrainJob for a TrainJob whose runtime's JobSet template already names
// runtimeQueue ("" when it names none): that queue is explicit and is kept.
func TrainJobWithRuntime(tj *unstructured.Unstructured, runtimeQueue string, ns Namespace, pols *Policies) Result {
	if tj == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()
	meta := &metav1.ObjectMeta{Annotations: tj.GetAnnotations()}

	if q, _ := TrainJobQueue(tj); NormalizeQueue(q) == "" && NormalizeQueue(runtimeQueue) == "" {
		if queue, source := r.queueDefault(); queue != "" {
			patches, had, _ := unstructured.NestedSlice(tj.Object, "spec", "runtimePatches")
			i := -1
			for j, p := range patches {
				if m, ok := p.(map[string]any); ok && m["manager"] == TrainJobRuntimePatchManager {
					i = j
				}
			}
			if i < 0 {
				patches = append(patches, map[string]any{"manager": TrainJobRuntimePatchManager})
				i = len(patches) - 1
			}
			entry := patches[i].(map[string]any)
			_ = unstructured.SetNestedField(entry, queue, "trainingRuntimeSpec", "template", "metadata", "annotations", QueueNameAnnotation)
			_ = unstructured.SetNestedSlice(tj.Object, patches, "spec", "runtimePatches")
			// A list of hyperbatch's entry alone is recorded as the list: an UPDATE that drops it gets it
			// back whole (carry-over restores paths, and cannot add a list element).
			path := TrainJobQueuePath(i)
			if !had || len(patches) == 1 {
				path = "spec.runtimePatches"
			}
			r.record(path, FieldQueue, source)
		}
	}
	if TrainJobActiveDeadlineSeconds(tj) == 0 && d.ActiveDeadlineSeconds != nil && *d.ActiveDeadlineSeconds > 0 {
		_ = unstructured.SetNestedField(tj.Object, *d.ActiveDeadlineSeconds, "spec", "activeDeadlineSeconds")
		r.record("spec.activeDeadlineSeconds", FieldActiveDeadlineSeconds, r.policySource())
	}
	r.fillAnnotation(meta, hbv1.TTLSecondsAfterFinishedAnnotation, formatInt32(d.TTLSecondsAfterFinished),
		FieldTTLSecondsAfterFinished, r.policySource())
	res := r.finish(meta)
	if res.Changed() {
		tj.SetAnnotations(meta.Annotations)
	}
	return res
}

// TrainJobOwned reports whether a TrainJob is obj's controller (Trainer's JobSet of a TrainJob).
func TrainJobOwned(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == TrainJobGVK.Kind && ref.APIVersion == TrainJobGVK.GroupVersion().String()
}
