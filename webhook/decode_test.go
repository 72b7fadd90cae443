package webhook

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// Objects whose apiVersion or kind is malformed or names another kind are refused, as
// controller-runtime's decoder refuses them.
func TestDecodeObjectTypeMeta(t *testing.T) {
	gvk := specOf(KindPod).GVK
	for raw, ok := range map[string]bool{
		`{"apiVersion":"v1","kind":"Pod"}`:    true,
		`{}`:                                  true, // both taken from the handler
		`{"kind":"Pod"}`:                      true,
		`{"apiVersion":"v1"}`:                 true,
		`{"apiVersion":null,"kind":null}`:     true,
		`{"APIVERSION":"v1","Kind":"Pod"}`:    true, // matched as encoding/json does
		`{"apiVersion":"a/b/c","kind":"Pod"}`: false,
		`{"KIND":"Job"}`:                      false,
		`{"APIVERSION":"batch/v1"}`:           false,
		`{"kind":"Pod","KIND":"Job"}`:         false, // the last match wins
		`{"kind":"Job","KIND":"Pod"}`:         true,
		`{"ki\u006ed":"Job"}`:                 false,
		`{"kind":7}`:                          false,
		`{"metadata":{"kind":"Job"},"spec":{"x":"\"kind\""}}`: true, // only the top level counts
	} {
		err := decodeObject([]byte(raw), &corev1.Pod{}, gvk)
		if (err == nil) != ok {
			t.Errorf("%s: error %v, want accepted=%v", raw, err, ok)
		}
	}
}

// decodeObject accepts exactly the JSON objects controller-runtime's admission decoder accepts,
// and decodes them to the same object.
func FuzzDecodeObject(f *testing.F) {
	f.Add(uint8(0), []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`))
	f.Add(uint8(1), []byte(`{"apiVersion":"batch.volcano.sh/","kind":"Job","spec":{"minAvailable":2}}`))
	f.Add(uint8(1), []byte(`{"Kind":"Job","apiversion":"batch.volcano.sh/v1alpha1","spec":{"queue":"q"}}`))
	f.Add(uint8(0), []byte(`{"apiVersion":"x/y/z"}`))
	f.Add(uint8(0), []byte(`{"spec":{"priority":1.5}}`))
	dec := admission.NewDecoder(scheme.New())
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte) {
		if !json.Valid(raw) { // that decoder also reads YAML; the apiserver sends JSON
			return
		}
		k := []Kind{KindPod, KindVolcanoJob}[kind%2]
		newObj := map[Kind]func() client.Object{
			KindPod:        func() client.Object { return &corev1.Pod{} },
			KindVolcanoJob: func() client.Object { return &batchv1alpha1.Job{} },
		}[k]
		want, got := newObj(), newObj()
		wantErr := dec.DecodeRaw(runtime.RawExtension{Raw: raw}, want)
		err := decodeObject(raw, got, specOf(k).GVK)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: decodeObject error %v, controller-runtime's %v", raw, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %+v, controller-runtime %+v", raw, got, want)
		}
	})
}
