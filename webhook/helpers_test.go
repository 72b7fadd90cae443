package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// teamA governs namespaces labelled team=a with every default set.
func teamA() *hbv1.WorkloadPolicy { return builders.TeamA().Obj() }

func namespace(name string, labels, annotations map[string]string) *corev1.Namespace {
	return builders.Namespace(name, labels, annotations)
}

func batchNormal() *schedulingv1.PriorityClass { return builders.PriorityClass("batch-normal", 1000) }

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
	gvk := specOf(kind).GVK
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
	gvk := specOf(kind).GVK
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
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
	require.NoError(t, err)
	for _, op := range patchOps(t, resp) {
		require.NoError(t, applyOp(doc, op.Operation, op.Path, op.Value), "patch %s %s does not apply to the request's object", op.Operation, op.Path)
	}
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, out))
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
		assert.Contains(t, all, s, "warnings")
	}
}

func wantDenied(t *testing.T, resp admission.Response, code int32, substrings ...string) {
	t.Helper()
	require.False(t, resp.Allowed, "allowed, want denied with %v", substrings)
	require.NotNil(t, resp.Result)
	require.Equal(t, code, resp.Result.Code, "result %+v", resp.Result)
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

// decodeJSONObject decodes a JSON object with encoding/json (numbers kept as json.Number).
func decodeJSONObject(raw []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return m, dec.Decode(&m)
}

// oneTask is the smallest task list Volcano's own job webhook admits (it refuses a Job without
// tasks, and hyperbatch's validator then leaves the Job to it: volcanoRefusal).
func oneTask() []batchv1alpha1.TaskSpec {
	return []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1}}
}
