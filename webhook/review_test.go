package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// answer is what the apiserver reads from a webhook's answer.
type answer struct {
	status     int
	apiVersion string
	kind       string
	uid        string
	allowed    bool
	code       int32
	patch      string
	patchType  string
	warnings   []string
}

func serve(t *testing.T, h http.Handler, contentType string, body []byte) answer {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var ar admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ar), "answer %q", w.Body.String())
	a := answer{status: w.Code, apiVersion: ar.APIVersion, kind: ar.Kind}
	if res := ar.Response; res != nil {
		a.uid, a.allowed, a.warnings, a.patch = string(res.UID), res.Allowed, res.Warnings, sortedPatch(t, res.Patch)
		if res.Result != nil {
			a.code = res.Result.Code
		}
		if res.PatchType != nil {
			a.patchType = string(*res.PatchType)
		}
	}
	return a
}

// sortedPatch is a JSON patch's operations sorted by path (the handlers' order of operations on
// separate paths is not fixed).
func sortedPatch(t *testing.T, patch []byte) string {
	t.Helper()
	if len(patch) == 0 {
		return ""
	}
	var ops []map[string]any
	require.NoError(t, json.Unmarshal(patch, &ops))
	sort.Slice(ops, func(i, j int) bool { return fmt.Sprint(ops[i]["path"]) < fmt.Sprint(ops[j]["path"]) })
	out, err := json.Marshal(ops)
	require.NoError(t, err)
	return string(out)
}

// The review server answers every body, good or malformed, as controller-runtime's admission.Webhook
// answers it: the same apiVersion and kind, UID, allowed, result code, patch and warnings. Error
// messages are worded differently; their codes agree. One difference is wanted: a body refused
// before it is decoded is answered in a v1 AdmissionReview, where controller-runtime leaves out
// apiVersion and kind (an answer the apiserver cannot read, so it reports a decoding error instead
// of the refusal).
func TestReviewServerAnswersAsControllerRuntime(t *testing.T) {
	d := benchDeps(t)
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "bench"},
		Spec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1,
			Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"}, Spec: benchPodSpec()}
	badQueue := pod.DeepCopy()
	badQueue.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": "not-allowed"}
	review := func(apiVersion string, req *admissionv1.AdmissionRequest) []byte {
		raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "AdmissionReview", "request": req})
		require.NoError(t, err)
		return raw
	}
	v1 := func(req admission.Request) []byte { return review("admission.k8s.io/v1", &req.AdmissionRequest) }
	mutateJob := request(t, KindVolcanoJob, admissionv1.Create, job, nil)
	handlers := map[string]admission.Handler{
		"mutate-volcano-job": d.volcanoJobMutator(),
		"validate-pod":       d.podValidator(),
		"mutate-pod":         d.podMutator(),
		"panics": admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			panic("boom")
		}),
	}
	cases := []struct {
		name, handler, contentType string
		body                       []byte
	}{
		{"a patched create", "mutate-volcano-job", "application/json", v1(mutateJob)},
		{"a patched pod", "mutate-pod", "application/json", v1(request(t, KindPod, admissionv1.Create, pod, nil))},
		{"a denial", "validate-pod", "application/json", v1(request(t, KindPod, admissionv1.Create, badQueue, nil))},
		{"an allowed update", "validate-pod", "application/json", v1(request(t, KindPod, admissionv1.Update, pod, pod))},
		{"a v1beta1 review", "mutate-volcano-job", "application/json", review("admission.k8s.io/v1beta1", &mutateJob.AdmissionRequest)},
		{"no apiVersion and kind", "mutate-volcano-job", "application/json", func() []byte {
			raw, err := json.Marshal(map[string]any{"request": mutateJob.AdmissionRequest})
			require.NoError(t, err)
			return raw
		}()},
		{"the wrong content type", "mutate-volcano-job", "text/plain", v1(mutateJob)},
		{"no content type", "mutate-volcano-job", "", v1(mutateJob)},
		{"an empty body", "mutate-volcano-job", "application/json", nil},
		{"not JSON", "mutate-volcano-job", "application/json", []byte("{not json")},
		{"no request", "mutate-volcano-job", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)},
		{"a handler that panics", "panics", "application/json", v1(mutateJob)},
		{"a malformed object", "mutate-volcano-job", "application/json", []byte(strings.Replace(string(v1(mutateJob)), `"replicas":1`, `"replicas":"one"`, 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := handlers[tc.handler]
			ours := serve(t, NewAdmissionWebhook(h), tc.contentType, tc.body)
			stock := serve(t, &admission.Webhook{Handler: h, RecoverPanic: ptr.To(true)}, tc.contentType, tc.body)
			assert.Equal(t, withV1(stock), ours)
		})
	}
	t.Run("an oversized body", func(t *testing.T) {
		body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + strings.Repeat("x", maxReviewSize) + `"}}`)
		h := handlers["mutate-volcano-job"]
		ours := serve(t, NewAdmissionWebhook(h), "application/json", body)
		assert.Equal(t, withV1(serve(t, &admission.Webhook{Handler: h}, "application/json", body)), ours)
		assert.Equal(t, int32(http.StatusRequestEntityTooLarge), ours.code)
	})
	// The checks above would pass if both answered every body with an error: the good ones must
	// have been admitted, patched and denied as their handlers decide.
	good := serve(t, NewAdmissionWebhook(handlers["mutate-volcano-job"]), "application/json", v1(mutateJob))
	assert.True(t, good.allowed)
	assert.Equal(t, "uid", good.uid)
	assert.Equal(t, "JSONPatch", good.patchType)
	assert.Contains(t, good.patch, "/spec/queue")
	denied := serve(t, NewAdmissionWebhook(handlers["validate-pod"]), "application/json", v1(request(t, KindPod, admissionv1.Create, badQueue, nil)))
	assert.False(t, denied.allowed)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), denied.code)
}

// withV1 is controller-runtime's answer with the apiVersion and kind it leaves out of refusals made
// before decoding.
func withV1(a answer) answer {
	if a.apiVersion == "" && a.kind == "" {
		a.apiVersion, a.kind = "admission.k8s.io/v1", "AdmissionReview"
	}
	return a
}
