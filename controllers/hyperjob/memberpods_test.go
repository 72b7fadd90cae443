package hyperjob

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// Volcano zeroes a finished job's counts on its next pass and Karmada reflects only that: the
// children to count in their members are the finished ones reporting no pods and not frozen yet.
func TestUncountedFinishedAndCountedOverride(t *testing.T) {
	hj := twoByTwo()
	p := plan(t, hj)
	jobs := jobsOf(vcjob("hj-a-0", batchv1alpha1.Completed, 0, 0), vcjob("hj-a-1", batchv1alpha1.Completed, 0, 2),
		vcjob("hj-b-0", batchv1alpha1.Running, 0, 0), vcjob("hj-b-1", batchv1alpha1.Failed, 0, 0))
	fp := finishedPods{"b": {"1": {0, 1}}}
	assert.Equal(t, []string{"hj-a-0"}, uncountedFinished(hj, fp, p, jobs), "hj-a-1 reports counts, hj-b-0 runs, hj-b-1 is frozen")
	assert.Empty(t, uncountedFinished(hj, fp, &Plan{Refusal: &Refusal{}}, jobs))

	out, changed := freezeFinished(hj, fp, p, jobs, map[string]podCounts{"hj-a-0": {2, 0}})
	require.True(t, changed)
	assert.Equal(t, finishedPods{"a": {"0": {2, 0}, "1": {2, 0}}, "b": {"1": {0, 1}}}, out, "hj-a-0 frozen with its member's counts")
}

// The counter asks Karmada's cluster proxy of the child's member for the pods with Volcano's
// job-name label and counts Succeeded and Failed ones.
func TestClusterProxyPodCounter(t *testing.T) {
	var gotPath, gotSelector string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotSelector = r.URL.Path, r.URL.Query().Get("labelSelector")
		pod := func(phase corev1.PodPhase) corev1.Pod { return corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			Items: []corev1.Pod{pod(corev1.PodSucceeded), pod(corev1.PodSucceeded), pod(corev1.PodFailed), pod(corev1.PodRunning)}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer srv.Close()
	c, err := clusterProxyPodCounter(&rest.Config{Host: srv.URL + "/"})(context.Background(), "member2", "ns", "hj-a-0")
	require.NoError(t, err)
	assert.Equal(t, podCounts{2, 1}, c)
	assert.Equal(t, "/apis/cluster.karmada.io/v1alpha1/clusters/member2/proxy/api/v1/namespaces/ns/pods", gotPath)
	assert.Equal(t, "volcano.sh/job-name=hj-a-0", gotSelector)

	srv.Close()
	_, err = clusterProxyPodCounter(&rest.Config{Host: srv.URL})(context.Background(), "member2", "ns", "hj-a-0")
	assert.ErrorContains(t, err, "member member2 through Karmada's cluster proxy")
}
