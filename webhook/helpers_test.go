package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// teamA governs namespaces labelled team=a with every default set.
func teamA() *hbv1.WorkloadPolicy {
	return &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		Weight:            10,
		Defaults: hbv1.PolicyDefaults{
			Queue: "team-a", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler",
			NetworkTopology:         &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyHard, HighestTierAllowed: ptr.To[int32](2)},
			TTLSecondsAfterFinished: ptr.To[int32](86400), ActiveDeadlineSeconds: ptr.To[int64](604800),
			Propagation: &hbv1.Propagation{ClusterNames: []string{"a", "b"}, ReplicaDivisionPreference: "Aggregated",
				MaxClusters: ptr.To[int32](1), PropagateDeps: ptr.To(true)},
		},
		AllowedQueues: []string{"team-a", "shared"},
	}}
}

func namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

func batchNormal() *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}, Value: 1000,
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)}
}

// testDeps serves the handlers from a fake client standing in for the manager's cache.
func testDeps(t testing.TB, objs ...client.Object) *deps {
	t.Helper()
	s := scheme.New()
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return newDeps(c, Options{NamespaceWait: 100e6})
}

// request builds an AdmissionRequest for obj (and old on UPDATE) as the apiserver sends it.
func request(t testing.TB, kind Kind, op admissionv1.Operation, obj, old client.Object) admission.Request {
	t.Helper()
	gvk := kindSpecs[kind].gvk
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Operation: op,
		Namespace: obj.GetNamespace(),
		Name:      obj.GetName(),
		Object:    runtime.RawExtension{Raw: rawOf(t, kind, obj)},
	}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: rawOf(t, kind, old)}
	}
	return req
}

func rawOf(t testing.TB, kind Kind, obj client.Object) []byte {
	t.Helper()
	gvk := kindSpecs[kind].gvk
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// admit runs a handler and, when it patched, applies the patch to the request's object as the
// apiserver does (strictly: an "add" needs its parent) and decodes the result into out.
func admit(t *testing.T, h admission.Handler, req admission.Request, out client.Object) admission.Response {
	t.Helper()
	resp := h.Handle(context.Background(), req)
	if out == nil || !resp.Allowed {
		return resp
	}
	doc, err := decodeJSONObject(req.Object.Raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range patchOps(t, resp) {
		if err := applyOp(doc, op.Operation, op.Path, op.Value); err != nil {
			t.Fatalf("patch %s %s does not apply to the request's object: %v", op.Operation, op.Path, err)
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return resp
}

// applyOp is a strict RFC 6902 add/replace/remove on a JSON tree.
func applyOp(doc map[string]any, op, pointer string, value any) error {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(parts[i], "~1", "/"), "~0", "~")
	}
	var cur any = doc
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[p]
			if !ok {
				return fmt.Errorf("missing %q", p)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(c) {
				return fmt.Errorf("bad index %q", p)
			}
			cur = c[i]
		default:
			return fmt.Errorf("cannot descend into %T at %q", cur, p)
		}
	}
	last := parts[len(parts)-1]
	switch c := cur.(type) {
	case map[string]any:
		switch op {
		case "add":
			c[last] = value
		case "replace":
			if _, ok := c[last]; !ok {
				return fmt.Errorf("replace of missing %q", last)
			}
			c[last] = value
		case "remove":
			if _, ok := c[last]; !ok {
				return fmt.Errorf("remove of missing %q", last)
			}
			delete(c, last)
		default:
			return fmt.Errorf("unexpected op %q", op)
		}
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i >= len(c) || op != "replace" {
			return fmt.Errorf("unsupported list op %s %q", op, last)
		}
		c[i] = value
	default:
		return fmt.Errorf("parent of %q is %T", last, cur)
	}
	return nil
}

func wantWarning(t *testing.T, resp admission.Response, substrings ...string) {
	t.Helper()
	all := strings.Join(resp.Warnings, "\n")
	for _, s := range substrings {
		if !strings.Contains(all, s) {
			t.Errorf("warnings %q do not contain %q", resp.Warnings, s)
		}
	}
}

func wantDenied(t *testing.T, resp admission.Response, code int32, substrings ...string) {
	t.Helper()
	if resp.Allowed {
		t.Fatalf("allowed, want denied with %v", substrings)
	}
	if resp.Result == nil || resp.Result.Code != code {
		t.Fatalf("result %+v, want code %d", resp.Result, code)
	}
	for _, s := range substrings {
		if !strings.Contains(resp.Result.Message, s) {
			t.Errorf("message %q does not contain %q", resp.Result.Message, s)
		}
	}
}

// patchOps decodes a response's JSON patch; nil when it has none.
func patchOps(t testing.TB, resp admission.Response) []jsonpatch.JsonPatchOperation {
	t.Helper()
	if len(resp.Patches) > 0 {
		t.Fatal("handlers answer with an encoded patch (Response.Patch), not with Response.Patches")
	}
	if len(resp.Patch) == 0 {
		return nil
	}
	var ops []jsonpatch.JsonPatchOperation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatalf("the response's patch is not a JSON patch: %v\n%s", err, resp.Patch)
	}
	return ops
}

// decodeJSONObject decodes a JSON object with encoding/json (numbers kept as json.Number), the
// reference the webhook's own parser (internal/jsonpatch) is fuzzed against.
func decodeJSONObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}
