package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func trainJobObj(ann map[string]string, patches ...any) *unstructured.Unstructured {
	tj := defaults.NewTrainJob()
	tj.SetNamespace("a")
	tj.SetName("llm")
	spec := map[string]any{"runtimeRef": map[string]any{"name": "torch"}}
	if len(patches) > 0 {
		spec["runtimePatches"] = patches
	}
	tj.Object["spec"] = spec
	if ann != nil {
		tj.SetAnnotations(ann)
	}
	return tj
}

func queueEntry(manager, queue string) map[string]any {
	return map[string]any{"manager": manager, "trainingRuntimeSpec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{defaults.QueueNameAnnotation: queue}}}}}
}

// A governed TrainJob gets the queue in a runtimePatches entry, the deadline in
// spec.activeDeadlineSeconds and the TTL annotation; bad input is refused naming the field and the fix.
func TestTrainJobAdmission(t *testing.T) {
	pol := builders.TeamA().AllowedQueues("team-a", "shared").Obj()
	d := testDeps(t, pol, nsA)

	out := &unstructured.Unstructured{}
	resp := admit(t, d.trainJobMutator(), request(t, KindTrainJob, admissionv1.Create, trainJobObj(nil), nil), out)
	require.True(t, resp.Allowed, "%v", resp.Result)
	q, i := defaults.TrainJobQueue(out)
	assert.Equal(t, "team-a", q)
	assert.Equal(t, defaults.TrainJobRuntimePatchManager, defaults.TrainJobRuntimePatches(out)[i]["manager"])
	assert.Equal(t, int64(604800), defaults.TrainJobActiveDeadlineSeconds(out))
	assert.Equal(t, "86400", out.GetAnnotations()[hbv1.TTLSecondsAfterFinishedAnnotation])
	assert.Equal(t, "team-a/queue,ttlSecondsAfterFinished,activeDeadlineSeconds", out.GetAnnotations()[hbv1.DefaultedByAnnotation])

	v := d.trainJobValidator()
	wantDenied(t, v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create, trainJobObj(nil, queueEntry("me", "gpu")), nil)),
		http.StatusUnprocessableEntity, "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.annotations[scheduling.volcano.sh/queue-name]: Forbidden", "team-a")
	wantDenied(t, v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create,
		trainJobObj(map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "-1"}), nil)),
		http.StatusUnprocessableEntity, "metadata.annotations[hyperbatch.dev/ttl-seconds-after-finished]", "must be greater than or equal to 0",
		"use 0 to delete the workload as soon as it finishes, or omit the annotation to keep it")
	wantDenied(t, v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create,
		trainJobObj(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60"}), nil)),
		http.StatusUnprocessableEntity, "metadata.annotations[hyperbatch.dev/active-deadline-seconds]: Forbidden", "set spec.activeDeadlineSeconds: 60")
	resp = v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create, trainJobObj(nil, queueEntry("me", "shared")), nil))
	assert.True(t, resp.Allowed, "%v", resp.Result)

	// An UPDATE that drops hyperbatch's entry and the deadline gets them back.
	old := out.DeepCopy()
	resp = admit(t, d.trainJobMutator(), request(t, KindTrainJob, admissionv1.Update, trainJobObj(nil), old), out)
	require.True(t, resp.Allowed, "%v", resp.Result)
	q, _ = defaults.TrainJobQueue(out)
	assert.Equal(t, "team-a", q)
	assert.Equal(t, int64(604800), defaults.TrainJobActiveDeadlineSeconds(out))
}
