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

// A TrainJob's sub-group annotations are refused at once when they cannot be right whatever its
// JobSet's shape, naming the annotation and the fix; an UPDATE that leaves them as they were is not
// judged again.
func TestTrainJobSubGroupAnnotations(t *testing.T) {
	pol := builders.TeamA().AllowedQueues("team-a", "shared").Obj()
	d := testDeps(t, pol, nsA)
	v := d.trainJobValidator()
	by, pods := hbv1.SubGroupByAnnotation, hbv1.SubGroupPodsAnnotation
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{by: "rank"}, `annotation hyperbatch.dev/subgroup-by="rank" is not "replica" or "pods": set one of them, or remove it`},
		{map[string]string{by: "pods"}, `annotation hyperbatch.dev/subgroup-pods="" is not a positive integer: with hyperbatch.dev/subgroup-by=pods set it to the pods of each sub-group`},
		{map[string]string{pods: "4"}, "annotation hyperbatch.dev/subgroup-pods is set without hyperbatch.dev/subgroup-by"},
		{map[string]string{by: "pods", pods: "4", hbv1.SubGroupHighestTierAnnotation: "leaf"}, `annotation hyperbatch.dev/subgroup-highest-tier="leaf" is not a positive integer`},
	} {
		wantDenied(t, v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create, trainJobObj(tc.ann), nil)),
			http.StatusUnprocessableEntity, "metadata.annotations: Invalid value", tc.want)
	}
	good := trainJobObj(map[string]string{by: "pods", pods: "4", hbv1.SubGroupHighestTierAnnotation: "1"})
	resp := v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Create, good, nil))
	assert.True(t, resp.Allowed, "%v", resp.Result)

	bad := trainJobObj(map[string]string{by: "rank"})
	resp = v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Update, bad, bad))
	assert.True(t, resp.Allowed, "an UPDATE that does not touch the sub-group annotations was judged: %v", resp.Result)
	wantDenied(t, v.Handle(context.Background(), request(t, KindTrainJob, admissionv1.Update, bad, good)),
		http.StatusUnprocessableEntity, `hyperbatch.dev/subgroup-by="rank"`)
}
