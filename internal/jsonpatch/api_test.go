package jsonpatch

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gjp "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// stockPatch is controller-runtime's stock path, the reference implementation: the patch
// admission.PatchResponseFromRaw computes from the raw object and json.Marshal of the defaulted one.
func stockPatch(t testing.TB, raw []byte, after any) []gjp.JsonPatchOperation {
	t.Helper()
	out, err := json.Marshal(after)
	require.NoError(t, err)
	resp := admission.PatchResponseFromRaw(raw, out)
	require.True(t, resp.Allowed, "stock path: %+v", resp.Result)
	return resp.Patches
}

func decodePatch(t testing.TB, patch []byte) []gjp.JsonPatchOperation {
	t.Helper()
	ops := []gjp.JsonPatchOperation{}
	if len(patch) == 0 {
		return ops
	}
	require.NoError(t, json.Unmarshal(patch, &ops))
	return ops
}

// checkDiffMatchesStock: when the raw object is the typed rendering of before (what the stock path
// assumes), Diff's patch is the stock path's patch.
func checkDiffMatchesStock(t *testing.T, before, after runtime.Object) {
	t.Helper()
	raw, err := json.Marshal(before)
	require.NoError(t, err)
	_, patch, err := Diff(raw, before, after)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, stockPatch(t, raw, after)), canonical(t, decodePatch(t, patch)))
}

func TestDiffMatchesStockPath(t *testing.T) {
	before := &corev1.Pod{}
	before.Name = "p"
	before.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	after := before.DeepCopy()
	after.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": "team-a"}
	after.Spec.PriorityClassName = "batch-normal"
	after.Spec.SchedulerName = "hyperbatch-scheduler"
	checkDiffMatchesStock(t, before, after)

	job := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{Queue: "default", Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 2}}}}
	defaulted := job.DeepCopy()
	defaulted.Spec.Queue = "team-a"
	defaulted.Spec.Tasks[0].Template.Spec.SchedulerName = "s"
	checkDiffMatchesStock(t, job, defaulted)
}

// FuzzDiffMatchesStockPath: Diff agrees with controller-runtime's stock patch path for any pair of
// objects of one kind, after being a deep copy of before with changes (as the handlers call it).
func FuzzDiffMatchesStockPath(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`),
		[]byte(`{"metadata":{"annotations":{"a":"b"}},"spec":{"priorityClassName":"x","priority":3}}`))
	f.Add(uint8(1), []byte(`{"spec":{"tasks":[{"name":"w","replicas":2}]}}`), []byte(`{"spec":{"queue":"q","tasks":[{"name":"w","replicas":3}]}}`))
	f.Add(uint8(2), []byte(`{"spec":{"replicatedJobs":[{"name":"r"}]}}`), []byte(`{"metadata":{"labels":{"l":"v"}},"spec":{"suspend":true}}`))
	f.Fuzz(func(t *testing.T, kind uint8, before, after []byte) {
		newObj := []func() runtime.Object{
			func() runtime.Object { return &corev1.Pod{} },
			func() runtime.Object { return &batchv1alpha1.Job{} },
			func() runtime.Object { return &jobsetv1alpha2.JobSet{} },
		}[int(kind)%3]
		b := newObj()
		if json.Unmarshal(before, b) != nil {
			return
		}
		a := b.DeepCopyObject()
		if json.Unmarshal(after, a) != nil {
			return
		}
		checkDiffMatchesStock(t, b, a)
	})
}

func TestCarryOver(t *testing.T) {
	oldRaw := []byte(`{"metadata":{"annotations":{"hyperbatch.dev/defaulted-by":"p/queue","q":"old"}},` +
		`"spec":{"queue":"qa","rj":[{"name":"a","q":"qa"},{"name":"b","q":"qb"}]}}`)
	newRaw := []byte(`{"metadata":{"annotations":{"q":"new"}},"spec":{"queue":"","rj":[{"name":"b","q":""},{"name":"a","q":""}]}}`)
	patch, kept, err := CarryOver(newRaw, oldRaw, Carry{
		Paths:   []string{"spec.queue", "spec.rj[0].q", "spec.rj[1].q"},
		Skip:    func(oldPath string) bool { return oldPath == "spec.rj[0].q" }, // rj "a" was unset in the old object
		IfBlank: []string{"metadata.annotations[hyperbatch.dev/defaulted-by]", "metadata.annotations[q]"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.queue", "spec.rj[0].q"}, kept)
	assert.Equal(t, `[{"op":"add","path":"/metadata/annotations/hyperbatch.dev~1defaulted-by","value":"p/queue"},`+
		`{"op":"replace","path":"/spec/queue","value":"qa"},{"op":"replace","path":"/spec/rj/0/q","value":"qb"}]`,
		canonical(t, decodePatch(t, patch)))

	patch, _, err = CarryOver(newRaw, newRaw, Carry{Paths: []string{"spec.queue"}})
	require.NoError(t, err)
	assert.Nil(t, patch, "nothing to carry: no patch")

	_, _, err = CarryOver(newRaw, oldRaw, Carry{Paths: []string{"a[b"}})
	assert.Error(t, err, "a malformed path is an error")
}

func TestDocValue(t *testing.T) {
	before := &corev1.Pod{}
	after := before.DeepCopy()
	after.Annotations = map[string]string{"x/y": "v"}
	after.Spec.Priority = new(int32)
	*after.Spec.Priority = 7
	raw := []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}]}}`)
	doc, _, err := Diff(raw, before, after)
	require.NoError(t, err)
	for path, want := range map[string]string{"metadata.annotations[x/y]": "v", "spec.priority": "7", "metadata.name": "p",
		"spec.containers[0].ports": `[{"containerPort":80}]`} {
		got, ok := doc.Value(path)
		assert.True(t, ok, path)
		assert.Equal(t, want, got, path)
	}
	_, ok := doc.Value("spec.nothing")
	assert.False(t, ok)
}
