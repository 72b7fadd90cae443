package admissionpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// trainJob is a TrainJob of Kubeflow Trainer's API (trainer.kubeflow.org/v1alpha1) referencing the
// ClusterTrainingRuntime runtime, with annotations and runtimePatches (either may be nil).
func trainJob(name, runtime string, annotations map[string]string, patches []any) *unstructured.Unstructured {
	spec := map[string]any{"runtimeRef": map[string]any{"name": runtime}}
	if patches != nil {
		spec["runtimePatches"] = patches
	}
	tj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	tj.SetGroupVersionKind(defaults.TrainJobGVK)
	tj.SetName(name)
	if annotations != nil {
		tj.SetAnnotations(annotations)
	}
	return tj
}

// queuePatch is a runtimePatches entry of manager that names queue.
func queuePatch(manager, queue string) map[string]any {
	return map[string]any{"manager": manager, "trainingRuntimeSpec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{defaults.QueueNameAnnotation: queue}}}}}
}

// trainJobCorpus reaches every rule of the TrainJob engine and checks: nothing set (queue, deadline
// and TTL filled), an explicit queue (allowed, forbidden, misspelt), a runtime whose template names
// a queue, an explicit deadline and TTL, a negative TTL and the deadline annotation (refused).
func trainJobCorpus(plain, queued string) map[string]*unstructured.Unstructured {
	return map[string]*unstructured.Unstructured{
		"bare":            trainJob("bare", plain, nil, nil),
		"runtime-queue":   trainJob("runtime-queue", queued, nil, nil),
		"allowed-queue":   trainJob("allowed-queue", plain, nil, []any{queuePatch("example.io/user", "shared")}),
		"forbidden-queue": trainJob("forbidden-queue", plain, nil, []any{queuePatch("example.io/user", "b-only")}),
		"spaced-queue":    trainJob("spaced-queue", plain, nil, []any{queuePatch("example.io/user", " team-a ")}),
		"other-patch":     trainJob("other-patch", plain, nil, []any{map[string]any{"manager": "example.io/labels", "trainingRuntimeSpec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "y"}}}}}}),
		"explicit-ttl":    trainJob("explicit-ttl", plain, map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "60"}, nil),
		"negative-ttl":    trainJob("negative-ttl", plain, map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "-5"}, nil),
		"deadline-annot":  trainJob("deadline-annot", plain, map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60"}, nil),
		"explicit-deadline": func() *unstructured.Unstructured {
			tj := trainJob("explicit-deadline", plain, nil, nil)
			_ = unstructured.SetNestedField(tj.Object, int64(120), "spec", "activeDeadlineSeconds")
			return tj
		}(),
	}
}

// createTrainJob creates tj in ns and returns the stored object, normalized, or the refusal.
func createTrainJob(t *testing.T, c client.Client, w *framework.Warnings, ns string, tj *unstructured.Unstructured) outcome {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	tj = tj.DeepCopy()
	tj.SetNamespace(ns)
	w.Take()
	err := c.Create(ctx, tj)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(defaults.TrainJobGVK)
	return resultOf(t, c, w, ns, client.ObjectKeyFromObject(tj), got, err)
}

// A TrainJob keeps its webhook in policy mode (admissionpolicy.Uncovered, docs/webhooks.md): the
// webhook configurations a policy-mode manager registers still hold the TrainJob webhooks, and every
// TrainJob of the corpus, in each profile, is stored the same (or refused with the same code and
// message, and warned the same) in a namespace of each mode. The corpus's expectations that matter
// to a user are checked in the webhook namespace too, so the comparison is not of two empty
// results: team-a's bare TrainJob gets team-a's queue, deadline and TTL; a runtime's queue is kept;
// a forbidden queue and a negative TTL are refused, naming the field.
func TestEquivalentTrainJobs(t *testing.T) {
	policyKinds := make([]hbwebhook.Kind, 0)
	for _, p := range admissionpolicy.Programs() {
		policyKinds = append(policyKinds, p.Kind)
	}
	require.NotContains(t, policyKinds, hbwebhook.KindTrainJob, "TrainJob is covered by the policies: this test compares the webhook with itself")
	kinds := slices.DeleteFunc(hbwebhook.AllKinds(), func(k hbwebhook.Kind) bool { return slices.Contains(policyKinds, k) })
	mwc, vwc := hbwebhook.Configurations(hbwebhook.ConfigOptions{URL: "https://127.0.0.1:1", Kinds: kinds})
	var urls []string
	for _, wh := range mwc.Webhooks {
		urls = append(urls, *wh.ClientConfig.URL)
	}
	for _, wh := range vwc.Webhooks {
		urls = append(urls, *wh.ClientConfig.URL)
	}
	for _, path := range []string{"/mutate-trainjob", "/validate-trainjob"} {
		assert.True(t, slices.ContainsFunc(urls, func(u string) bool { return strings.HasSuffix(u, path) }),
			"policy mode's webhook configurations have no %s entry: %v", path, urls)
	}

	ctx := context.Background()
	plain, queued := "tj-plain", "tj-queued"
	for name, queue := range map[string]string{plain: "", queued: "team-a"} {
		rt := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"mlPolicy": map[string]any{"numNodes": int64(1)},
			"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
				"name": "node",
				"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "node", "image": "busybox"}}}}}},
			}}}},
		}}}
		rt.SetAPIVersion(defaults.TrainJobGVK.GroupVersion().String())
		rt.SetKind("ClusterTrainingRuntime")
		rt.SetName(name)
		if queue != "" {
			_ = unstructured.SetNestedField(rt.Object, queue, "spec", "template", "metadata", "annotations", defaults.QueueNameAnnotation)
		}
		require.NoError(t, env.Client.Create(ctx, rt))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
	}

	c, w := warningClient(t)
	corpus := trainJobCorpus(plain, queued)
	profiles := map[string]pair{
		"team-a":    profile(t, "tj-team-a", map[string]string{"team": "a"}, nil),
		"ns-queue":  profile(t, "tj-ns-queue", map[string]string{"team": "a"}, map[string]string{defaults.QueueNameAnnotation: " from-ns "}),
		"invalid":   profile(t, "tj-invalid", map[string]string{"team": "b"}, nil),
		"no-policy": profile(t, "tj-no-policy", nil, nil),
	}
	seen := map[string]outcome{}
	for pname, p := range profiles {
		for name, tj := range corpus {
			what := pname + "/" + name
			wh, pol := createTrainJob(t, c, w, p.webhook, tj), createTrainJob(t, c, w, p.policy, tj)
			seen[what] = wh
			if wh.err != "" || pol.err != "" {
				assert.Equal(t, wh.code, pol.code, "%s: status code (webhook %q, policy %q)", what, wh.err, pol.err)
				assert.Equal(t, wh.err, pol.err, "%s: refusal", what)
			} else {
				assert.Equal(t, wh.obj, pol.obj, "%s: stored TrainJob", what)
			}
			assert.Equal(t, wh.warnings, pol.warnings, "%s: warnings", what)
		}
	}

	// What the webhook namespace got (so both modes did it).
	bare := seen["team-a/bare"]
	require.Empty(t, bare.err)
	tj := &unstructured.Unstructured{Object: bare.obj}
	q, _ := defaults.TrainJobQueue(tj)
	assert.Equal(t, "team-a", q, "team-a's queue in runtimePatches")
	// normalize decoded the object from JSON: its numbers are float64.
	deadline, _, _ := unstructured.NestedFieldNoCopy(tj.Object, "spec", "activeDeadlineSeconds")
	assert.Equal(t, "604800", fmt.Sprint(deadline), "team-a's deadline in spec.activeDeadlineSeconds")
	assert.Equal(t, "86400", tj.GetAnnotations()[hbv1.TTLSecondsAfterFinishedAnnotation], "team-a's TTL annotation")
	assert.NotEmpty(t, tj.GetAnnotations()[hbv1.DefaultedByAnnotation])
	rq := seen["team-a/runtime-queue"]
	require.Empty(t, rq.err)
	q, _ = defaults.TrainJobQueue(&unstructured.Unstructured{Object: rq.obj})
	assert.Empty(t, q, "no runtimePatches queue where the runtime names one")
	for _, refused := range []struct{ what, field string }{
		{"team-a/forbidden-queue", "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.annotations[scheduling.volcano.sh/queue-name]"},
		{"team-a/negative-ttl", "metadata.annotations[" + hbv1.TTLSecondsAfterFinishedAnnotation + "]"},
		{"team-a/deadline-annot", "metadata.annotations[" + hbv1.ActiveDeadlineSecondsAnnotation + "]"},
	} {
		assert.Contains(t, seen[refused.what].err, refused.field, "%s: the refusal names the field", refused.what)
	}
}
