package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// trainJob is a TrainJob in namespace a; spec and annotations may be nil.
func trainJob(annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
	tj := NewTrainJob()
	tj.SetNamespace("a")
	tj.SetName("llm")
	if spec == nil {
		spec = map[string]any{}
	}
	spec["runtimeRef"] = map[string]any{"name": "torch"}
	tj.Object["spec"] = spec
	if annotations != nil {
		tj.SetAnnotations(annotations)
	}
	return tj
}

func queuePatch(manager, queue string) map[string]any {
	return map[string]any{"manager": manager, "trainingRuntimeSpec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{QueueNameAnnotation: queue}}}}}
}

func TestTrainJob(t *testing.T) {
	pols := mustPolicies(t, teamA())
	ttl := hbv1.TTLSecondsAfterFinishedAnnotation
	tests := []struct {
		name         string
		ns           Namespace
		runtimeQueue string
		in, want     *unstructured.Unstructured
		res          wantResult
	}{{
		name: "queue into a runtimePatches entry, deadline into the native field, TTL annotation",
		ns:   nsA,
		in:   trainJob(nil, nil),
		want: trainJob(map[string]string{ttl: "86400", hbv1.DefaultedByAnnotation: "team-a/queue,ttlSecondsAfterFinished,activeDeadlineSeconds"},
			map[string]any{"runtimePatches": []any{queuePatch(TrainJobRuntimePatchManager, "team-a")}, "activeDeadlineSeconds": int64(604800)}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.runtimePatches", "spec.activeDeadlineSeconds", "metadata.annotations[" + ttl + "]"},
			DefaultedBy: "team-a/queue,ttlSecondsAfterFinished,activeDeadlineSeconds"},
	}, {
		name: "explicit values are kept: a user's patch queue, the deadline, the TTL; another manager's patch is left alone",
		ns:   nsA,
		in: trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60),
			"runtimePatches": []any{map[string]any{"manager": "example.io/team"}, queuePatch("me", "mine")}}),
		want: trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60),
			"runtimePatches": []any{map[string]any{"manager": "example.io/team"}, queuePatch("me", "mine")}}),
		res: wantResult{Policy: "team-a"},
	}, {
		name:         "the runtime's queue is explicit",
		ns:           nsA,
		runtimeQueue: "rt-queue",
		in:           trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60)}),
		want:         trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60)}),
		res:          wantResult{Policy: "team-a"},
	}, {
		name: "the namespace's queue annotation comes first",
		ns:   nsML,
		in:   trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60)}),
		want: trainJob(map[string]string{ttl: "5", hbv1.DefaultedByAnnotation: "namespace:ml/queue"},
			map[string]any{"activeDeadlineSeconds": int64(60), "runtimePatches": []any{queuePatch(TrainJobRuntimePatchManager, "ml-queue")}}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.runtimePatches"}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "beside another manager's entry, the entry's queue is the path",
		ns:   nsA,
		in:   trainJob(map[string]string{ttl: "5"}, map[string]any{"activeDeadlineSeconds": int64(60), "runtimePatches": []any{map[string]any{"manager": "x"}}}),
		want: trainJob(map[string]string{ttl: "5", hbv1.DefaultedByAnnotation: "team-a/queue"}, map[string]any{"activeDeadlineSeconds": int64(60),
			"runtimePatches": []any{map[string]any{"manager": "x"}, queuePatch(TrainJobRuntimePatchManager, "team-a")}}),
		res: wantResult{Policy: "team-a", Fields: []string{TrainJobQueuePath(1)}, DefaultedBy: "team-a/queue"},
	}, {
		name: "no governing policy: nothing",
		ns:   Namespace{Name: "free"},
		in:   trainJob(nil, nil),
		want: trainJob(nil, nil),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, res := applyOnce(t, tc.in, (*unstructured.Unstructured).DeepCopy, func(tj *unstructured.Unstructured) Result {
				return TrainJobWithRuntime(tj, tc.runtimeQueue, tc.ns, pols)
			})
			checkResult(t, res, tc.res)
			checkObject(t, got.Object, tc.want.Object)
		})
	}
}

func TestTrainJobQueue(t *testing.T) {
	tj := trainJob(nil, map[string]any{"runtimePatches": []any{queuePatch("a", "first"), map[string]any{"manager": "b"}, queuePatch("c", "last")}})
	q, i := TrainJobQueue(tj)
	assert.Equal(t, "last", q, "Trainer merges the entries in order: the last queue wins")
	assert.Equal(t, 2, i)
	_, i = TrainJobQueue(trainJob(nil, nil))
	assert.Equal(t, -1, i)
}

// A JobSet a TrainJob controls gets the scheduling defaults but no TTL or deadline of its own: the
// TrainJob's lifecycle governs it.
func TestJobSetOfATrainJobGetsNoLifecycle(t *testing.T) {
	pols := mustPolicies(t, teamA())
	js := jobSet(nil, nil, podTemplate(nil, "", "", nil))
	js.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "train", UID: "u", Controller: ptr.To(true)}}
	res := JobSet(js, nsA, pols)
	assert.True(t, res.Filled("metadata.annotations["+QueueNameAnnotation+"]"))
	assert.Nil(t, js.Spec.TTLSecondsAfterFinished)
	assert.NotContains(t, js.Annotations, hbv1.ActiveDeadlineSecondsAnnotation)
	assert.Equal(t, "team-a/queue,priorityClassName,schedulerName;jobset:train/groupName", js.Annotations[hbv1.DefaultedByAnnotation])

	plain := jobSet(nil, nil, podTemplate(nil, "", "", nil))
	JobSet(plain, nsA, pols)
	assert.NotNil(t, plain.Spec.TTLSecondsAfterFinished, "a JobSet of its own still gets the policy's TTL")
}
