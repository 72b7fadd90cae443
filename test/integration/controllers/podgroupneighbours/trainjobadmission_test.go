package podgroupneighbours

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/app"
	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/explain"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// governedNamespace is a new namespace governed by a WorkloadPolicy of its own (queue tq, allowed tq
// and shared, hyperbatch-scheduler, TTL 3600 s, deadline 600 s), returned once the webhook's policy
// cache has it (a dry-run TrainJob comes back defaulted: the positive signal).
func governedNamespace(t *testing.T) string { return governedNamespaceWith(t, 3600, 600) }

// governedNamespaceWith is governedNamespace with the policy's TTL and deadline.
func governedNamespaceWith(t *testing.T, ttl int32, deadline int64) string {
	t.Helper()
	ns := namespace(t)
	governBy(t, ns, "tj-policy", builders.MakePolicy("tj-"+ns).Weight(5).Selector("tj-policy", ns).Queue("tq").
		Scheduler("hyperbatch-scheduler").Lifecycle(ttl, deadline).AllowedQueues("tq", "shared").Obj())
	return ns
}

// governBy creates pol, whose selector is label=ns, labels the namespace so, and waits until the
// webhook defaults a TrainJob there (its policy cache has the policy).
func governBy(t *testing.T, ns, label string, pol *hbv1.WorkloadPolicy) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, pol))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	labelNamespace(t, ns, map[string]string{label: ns})
	framework.Eventually(t, wait, "the webhook to default a TrainJob in "+ns, func(ctx context.Context) (bool, error) {
		probe := trainerObject("TrainJob", ns, "probe", map[string]any{"runtimeRef": map[string]any{"name": "none"}})
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		return probe.GetAnnotations()[hbv1.DefaultedByAnnotation] != "", nil
	})
}

// Trainer's Volcano example in a governed namespace, admitted by hyperbatch: the stored TrainJob has
// the policy's queue in hyperbatch's runtimePatches entry, the policy's deadline in
// spec.activeDeadlineSeconds, the TTL annotation and the defaulted-by record; Trainer v2.3.0 reads the
// queue from there into its PodGroup and the JobSet, whose pods hyperbatch's JobSet admission gives
// hyperbatch-scheduler. A queue the policy forbids and a negative TTL are refused, naming the field.
func TestTrainJobAdmittedWhereTrainerReadsIt(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := governedNamespace(t)
	var tj *unstructured.Unstructured
	for _, o := range trainerExample(t, "04-volcano-integration.yaml", ns) {
		require.NoError(t, env.Client.Create(ctx, o), "%s %s", o.GetKind(), o.GetName())
		if o.GetKind() == "ClusterTrainingRuntime" {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		} else {
			tj = o
		}
	}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(tj), tj))
	q, i := defaults.TrainJobQueue(tj)
	assert.Equal(t, "tq", q)
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, defaults.TrainJobRuntimePatchManager, defaults.TrainJobRuntimePatches(tj)[i]["manager"])
	assert.Equal(t, int64(600), defaults.TrainJobActiveDeadlineSeconds(tj))
	assert.Equal(t, "3600", tj.GetAnnotations()[hbv1.TTLSecondsAfterFinishedAnnotation])
	assert.Equal(t, "tj-"+ns+"/queue,ttlSecondsAfterFinished,activeDeadlineSeconds", tj.GetAnnotations()[hbv1.DefaultedByAnnotation])

	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.GetName()}, pg)
		return err == nil, client.IgnoreNotFound(err)
	})
	assert.Equal(t, "tq", pg.Spec.Queue, "Trainer read the queue from hyperbatch's runtimePatches entry")
	js := &jobsetv1alpha2.JobSet{}
	framework.Eventually(t, wait, "Trainer's JobSet", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.GetName()}, js)
		return err == nil, client.IgnoreNotFound(err)
	})
	assert.Equal(t, "tq", js.Annotations[defaults.QueueNameAnnotation])
	require.Len(t, js.Spec.ReplicatedJobs, 1)
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	assert.Equal(t, "hyperbatch-scheduler", pod.Spec.SchedulerName)
	assert.Equal(t, "tq", pod.Annotations[defaults.QueueNameAnnotation])

	// kubectl hyperbatch explain and why, against this apiserver, on the TrainJob.
	var ex explain.Report
	runCLI(t, &ex, "explain", "trainjob/"+tj.GetName(), "-n", ns)
	assert.Equal(t, "tj-"+ns, ex.Policy)
	var filled []string
	for _, f := range ex.Filled {
		filled = append(filled, f.Field)
	}
	assert.ElementsMatch(t, []string{"queue", "ttlSecondsAfterFinished", "activeDeadlineSeconds"}, filled)
	var w why.Report
	runCLI(t, &w, "why", "tj/"+tj.GetName(), "-n", ns)
	assert.Equal(t, ns+"/"+tj.GetName(), w.Gang, "why resolves Trainer's PodGroup")
	assert.Equal(t, "TrainJob "+ns+"/"+tj.GetName(), w.Owner)
	assert.Equal(t, int32(4), w.MinMember)

	forbidden := trainerObject("TrainJob", ns, "forbidden", map[string]any{
		"runtimeRef": map[string]any{"name": "torch-distributed-volcano"},
		"runtimePatches": []any{map[string]any{"manager": "me", "trainingRuntimeSpec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{defaults.QueueNameAnnotation: "gpu"}}}}}},
	})
	err := env.Client.Create(ctx, forbidden)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.annotations[scheduling.volcano.sh/queue-name]")
	assert.Contains(t, err.Error(), "gpu")

	negative := trainerObject("TrainJob", ns, "negative", map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed-volcano"}})
	negative.SetAnnotations(map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "-5"})
	err = env.Client.Create(ctx, negative)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.annotations[hyperbatch.dev/ttl-seconds-after-finished]")
	assert.Contains(t, err.Error(), "use 0 to delete the workload as soon as it finishes, or omit the annotation to keep it")
}

// runCLI runs kubectl-hyperbatch's command tree against the test's apiserver with -o json into v.
func runCLI(t *testing.T, v any, args ...string) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kc))
	var out, errOut bytes.Buffer
	cmd := app.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kc}, append(args, "-o", "json")...))
	cmd.SetContext(context.Background())
	code := exitcode.Of(cmd.Execute())
	require.NotContains(t, []int{exitcode.Failed, exitcode.Usage}, code, "kubectl hyperbatch %v: %s", args, errOut.String())
	require.NoError(t, json.Unmarshal(out.Bytes(), v), out.String())
}
