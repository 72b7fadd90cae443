package webhook

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Any request body, for any handler and operation, is answered without a panic, and a patch always
// applies to the object it was computed for.
func FuzzHandlers(f *testing.F) {
	f.Add(uint8(1), true, []byte(`{"metadata":{"name":"j","namespace":"a"},"spec":{"queue":"default"}}`), []byte(`{"metadata":{"name":"j","namespace":"a","annotations":{"hyperbatch.dev/defaulted-by":"team-a/queue"}},"spec":{"queue":"team-a"}}`))
	f.Add(uint8(0), false, []byte(`{"metadata":{"name":"p","namespace":"a"},"spec":{"schedulerName":"default-scheduler","priority":0}}`), []byte(`{}`))
	f.Add(uint8(3), true, []byte(`{"metadata":{"name":"js","namespace":"a"},"spec":{"replicatedJobs":[{"name":"w","template":{}},{"name":"w"}]}}`),
		[]byte(`{"metadata":{"name":"js","namespace":"a"},"spec":{"replicatedJobs":[{"name":"w","template":{"spec":{"template":{"metadata":{"annotations":{"scheduling.volcano.sh/queue-name":"q"}}}}}}]}}`))
	f.Add(uint8(4), true, []byte(`{"metadata":{"name":"hj","namespace":"a"},"spec":{"replicatedJobs":[{"name":"r","templateSpec":{"queue":"default"}}]}}`),
		[]byte(`{"metadata":{"name":"hj","namespace":"a"},"spec":{"replicatedJobs":null}}`))
	f.Add(uint8(5), false, []byte(`{"metadata":{"name":"pp","namespace":"a"},"spec":{"placement":null}}`), []byte(`null`))
	f.Add(uint8(2), true, []byte(`[]`), []byte(`"x"`))
	d := testDeps(f, teamA(), nsA, batchNormal())
	all := d.handlers(AllKinds())
	f.Fuzz(func(t *testing.T, kindIdx uint8, update bool, obj, old []byte) {
		k := AllKinds()[int(kindIdx)%len(AllKinds())]
		gvk := specOf(k).GVK
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "u", Kind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Operation: admissionv1.Create, Namespace: "a",
		}}
		req.Object.Raw = obj
		if update {
			req.Operation, req.OldObject.Raw = admissionv1.Update, old
		}
		for _, path := range []string{specOf(k).MutatePath, specOf(k).ValidatePath} {
			h, ok := all[path]
			if !ok {
				continue
			}
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed || len(patchOps(t, resp)) == 0 {
				continue
			}
			doc, err := decodeJSONObject(obj)
			if err != nil {
				t.Fatalf("%s patched an undecodable object", path)
			}
			for _, op := range patchOps(t, resp) {
				if err := applyOp(doc, op.Operation, op.Path, op.Value); err != nil {
					t.Fatalf("%s: patch %s %s does not apply: %v", path, op.Operation, op.Path, err)
				}
			}
			// A CREATE's patch carries every default: the engine finds nothing left to fill in the
			// patched object.
			if m, ok := h.(refiller); ok && !update {
				patched, err := json.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				if fields, err := m.refill(d, patched); err != nil || len(fields) > 0 {
					t.Fatalf("%s: the patched object %s still lacks %v (%v)", path, patched, fields, err)
				}
			}
		}
	})
}

// refiller runs a mutator's defaults engine on an object and returns what it would fill.
type refiller interface {
	refill(d *deps, raw []byte) ([]string, error)
}

func (m *mutator[T]) refill(d *deps, raw []byte) ([]string, error) {
	obj := m.newObj()
	if err := decodeObject(raw, obj, m.gvk); err != nil {
		return nil, err
	}
	ns, err := d.namespace(context.Background(), "a")
	if err != nil {
		return nil, err
	}
	pols, err := d.policies.get(context.Background())
	if err != nil {
		return nil, err
	}
	res, err := m.apply(context.Background(), obj, ns, pols)
	if err != nil {
		return nil, err
	}
	return res.Paths(), nil
}
