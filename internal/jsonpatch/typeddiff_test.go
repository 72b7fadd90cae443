package jsonpatch

import (
	"encoding/json"
	"reflect"
	"testing"

	gjp "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// mergeTypedChanges writes exactly what mergeChanges writes for the two whole renderings, for any
// pair of objects of one type and any tree it writes into.
func FuzzTypedChanges(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`),
		[]byte(`{"metadata":{"name":"p","annotations":{"a":"b"},"creationTimestamp":"2024-01-01T00:00:00Z"},"spec":{"priorityClassName":"x","priority":3,"containers":[{"name":"c","image":"i"}]}}`),
		[]byte(`{"metadata":{"name":"p","x-unknown":1},"spec":"weird"}`))
	f.Add(uint8(1), []byte(`{"spec":{"tasks":[{"name":"w","replicas":2}]}}`), []byte(`{"spec":{"queue":"q","tasks":[{"name":"w","replicas":3,"template":{"spec":{"schedulerName":"s"}}}]}}`),
		[]byte(`{"spec":{"tasks":[{"name":"w"},{"name":"extra"}]}}`))
	f.Add(uint8(2), []byte(`{"spec":{"replicatedJobs":[{"name":"r"}]}}`), []byte(`{"metadata":{"labels":{"l":"v"}},"spec":{"replicatedJobs":[{"name":"r","replicas":2}],"suspend":true}}`),
		[]byte(`{"metadata":null}`))
	f.Fuzz(func(t *testing.T, kind uint8, before, after, raw []byte) {
		newObj := []func() any{
			func() any { return &corev1.Pod{} },
			func() any { return &batchv1alpha1.Job{} },
			func() any { return &jobsetv1alpha2.JobSet{} },
		}[int(kind)%3]
		b, a := newObj(), newObj()
		if json.Unmarshal(before, b) != nil || json.Unmarshal(after, a) != nil {
			return
		}
		checkTypedChanges(t, b, a, raw)
		// As the handlers use it: after is a deep copy of before (sharing its strings) with changes.
		a = b.(runtime.Object).DeepCopyObject()
		if json.Unmarshal(after, a) != nil {
			return
		}
		checkTypedChanges(t, b, a, raw)
	})
}

func checkTypedChanges(t *testing.T, b, a any, raw []byte) {
	t.Helper()
	dst1, err := decodeJSONMap(raw)
	if err != nil {
		return
	}
	orig, err := decodeLazyJSONMap(raw) // as patchRaw builds it
	if err != nil {
		t.Fatal(err)
	}
	dst2 := sharingTree(orig)
	bm, errB := toJSONMap(b)
	am, errA := toJSONMap(a)
	if errB != nil || errA != nil {
		return
	}
	oracle := sharingTree(dst1)
	mergeChanges(oracle, bm, am, nil)
	dst1 = oracle.root
	if err := mergeTypedChanges(dst2, b, a, nil); err != nil {
		t.Fatalf("mergeTypedChanges: %v", err)
	}
	if got := materialize(dst2.root); !reflect.DeepEqual(dst1, got) {
		g1, _ := json.Marshal(dst1)
		g2, _ := json.Marshal(got)
		t.Fatalf("typed merge differs:\nwhole renderings: %s\ntyped walk:       %s", g1, g2)
	}
	// The sharing tree left the original as it was, and the patch between them (which skips
	// shared parts) is the patch between the original and a separate copy of the result.
	full := decodeJSONMapOrFail(t, raw)
	if !reflect.DeepEqual(materialize(orig), full) {
		t.Fatalf("the sharing tree changed its original")
	}
	if got, want := jsonPatch(orig, dst2.root), jsonPatch(full, materialize(dst2.root)); !samePatch(got, want) {
		t.Fatalf("patch from the shared lazy tree %v, from whole trees %v", got, want)
	}
	// The encoded patch is the same too (rawNodes in values encode as their parsed trees).
	if got, err := encodePatch(jsonPatch(orig, dst2.root)); err != nil || !json.Valid(got) {
		t.Fatalf("encoding the patch: %v %s", err, got)
	}
}

// samePatch: the same operations, in any order (map iteration decides the order).
func samePatch(a, b []gjp.JsonPatchOperation) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(op gjp.JsonPatchOperation) string {
		v, _ := json.Marshal(op.Value)
		return op.Operation + " " + op.Path + " " + string(v)
	}
	seen := map[string]int{}
	for _, op := range a {
		seen[key(op)]++
	}
	for _, op := range b {
		if seen[key(op)] == 0 {
			return false
		}
		seen[key(op)]--
	}
	return true
}

func decodeJSONMapOrFail(t *testing.T, raw []byte) map[string]any {
	m, err := decodeJSONMap(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
