package defaults

import (
	"bytes"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

// LastAppliedAnnotation is where `kubectl apply` (client-side) keeps the manifest it applied.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// VolcanoJobAsSubmitted is the Volcano Job rule of admission (the kind table's engine function for
// Volcano Jobs): a HyperJob's child gets HyperJobChild (the HyperJob controller defaults its children
// itself, without a TTL of their own: the HyperJob's lifecycle governs them); a Job whose request
// shows that the user wrote spec.queue keeps it, even Volcano's "default" (VolcanoJobExplicitQueue);
// any other Job gets VolcanoJob, where "default" counts as unset since the Job CRD defaults an
// omitted queue to it before admission. See docs/webhooks.md, "Two mutating webhooks on one Volcano
// Job".
func VolcanoJobAsSubmitted(job *batchv1alpha1.Job, ns Namespace, pols *Policies) Result {
	if job == nil {
		return Result{}
	}
	if IsHyperJobChild(job) {
		return HyperJobChild(job, ns, pols)
	}
	if userWroteSpecQueue(&job.ObjectMeta) {
		return VolcanoJobExplicitQueue(job, ns, pols)
	}
	return VolcanoJob(job, ns, pols)
}

// userWroteSpecQueue reports whether the object shows that the user's manifest set spec.queue:
//   - a server-side apply: the apiserver computes managedFields before mutating admission, and an
//     Apply entry lists exactly the fields of the applied configuration (not the CRD's defaults);
//   - a client-side `kubectl apply`: its last-applied-configuration annotation is the manifest.
//
// A plain create or update (kubectl create, a controller) tells nothing: its Update entry owns every
// field of the decoded object, CRD defaults included. Then false, and the engine's rule holds.
func userWroteSpecQueue(meta *metav1.ObjectMeta) bool {
	for _, mf := range meta.ManagedFields {
		if mf.Operation == metav1.ManagedFieldsOperationApply && mf.FieldsV1 != nil && appliedSpecQueue(mf.FieldsV1.GetRawBytes()) {
			return true
		}
	}
	raw := meta.Annotations[LastAppliedAnnotation]
	if raw == "" {
		return false
	}
	var applied struct {
		Spec struct {
			Queue *string `json:"queue"`
		} `json:"spec"`
	}
	return json.Unmarshal([]byte(raw), &applied) == nil && applied.Spec.Queue != nil && *applied.Spec.Queue != ""
}

// appliedSpecQueue reports whether a managedFields fieldsV1 set contains f:spec.f:queue.
func appliedSpecQueue(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"f:queue"`)) {
		return false
	}
	var set struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if json.Unmarshal(raw, &set) != nil {
		return false
	}
	_, ok := set.Spec["f:queue"]
	return ok
}

// IsHyperJobChild reports whether a Volcano Job is controlled by a HyperJob.
func IsHyperJobChild(job *batchv1alpha1.Job) bool {
	ref := metav1.GetControllerOf(job)
	return ref != nil && ref.Kind == "HyperJob" && ref.APIVersion == trainingv1alpha1.SchemeGroupVersion.String()
}
