//go:build e2e

package e2e

// Two mutating webhooks on one Volcano Job: hyperbatch's and Volcano's own (webhook-manager), both
// installed by the local cluster. See docs/webhooks.md, "Two mutating webhooks on one Volcano Job".

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// volcanoExamples are the Volcano Jobs among Volcano's own examples (volcano.sh/volcano
// v1.14.0-alpha.0, example/) that write `queue: default`.
var volcanoExamples = []string{
	"job.yaml",
	"job-plugin.yaml",
	"task-start-dependency/job.yaml",
	"integrations/tensorflow/dist-mnist/tf-dist-mnist-example.yaml",
	"MindSpore-example/mindspore_cpu/mindspore-cpu.yaml",
	"integrations/ray/ray-example.yaml",
}

// volcanoModuleDir is volcano.sh/volcano's directory in the module cache (hack/tools/volcano pins it).
func volcanoModuleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "volcano.sh/volcano")
	cmd.Dir = filepath.Join(e2efw.RepoRoot(), "hack", "tools", "volcano")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download volcano.sh/volcano (in hack/tools/volcano)")
	var m struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &m))
	require.NotEmpty(t, m.Dir)
	return m.Dir
}

// Volcano's examples write `queue: default`. With a policy whose queue is another one, a client-side
// apply keeps the user's `default` (kubectl's last-applied-configuration shows the user wrote it), a
// server-side apply of the same file afterwards has no conflict on .spec.queue, and a server-side
// create keeps `default` too (the Apply managedFields entry shows the user wrote it).
// A manifest without a queue gets the policy's queue although Volcano's webhook (and the CRD) would
// write `default`.
func TestTwoWebhooksQueueOfVolcanoExamples(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	ensureQueue(t, "default")
	queue := "journey-" + ns
	ensureQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue})

	// Positive signal first: the webhook has the policy (a queue-less Job gets the policy's queue,
	// not Volcano's `default`).
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	applyUntilDefaulted(t, writeManifest(t, volcanoJobManifest(t, ns, "probe")), policy, probe)
	require.Equal(t, queue, probe.Spec.Queue, "policy queue wins over Volcano's default fallback")
	require.NotNil(t, probe.Spec.Tasks[0].MinAvailable, "Volcano's mutating webhook ran on the probe")

	dir := filepath.Join(volcanoModuleDir(t), "example")
	for _, ex := range volcanoExamples {
		t.Run(strings.ReplaceAll(ex, "/", "_"), func(t *testing.T) {
			file := filepath.Join(dir, ex)
			out, err := primary.Kubectl("apply", "-n", ns, "-f", file, "-o", "name")
			require.NoError(t, err, "client-side apply of %s:\n%s", ex, out)
			name := strings.TrimPrefix(strings.TrimSpace(out), "job.batch.volcano.sh/")
			var job batchv1alpha1.Job
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job))
			assert.Equal(t, "default", job.Spec.Queue, "client-side apply: the example's own queue is kept")
			assert.Equal(t, "volcano", job.Spec.SchedulerName, "the example's scheduler is kept")

			// The server-side apply after the client-side one: no conflict on .spec.queue (before the
			// user-written-queue rule there was). It does conflict on .spec.tasks: Volcano's mutating
			// webhook rewrote the atomic tasks list on create (task minAvailable), so the stored list
			// differs from the manifest's and belongs to kubectl-client-side-apply. That is Volcano's
			// behaviour, with or without hyperbatch (docs/webhooks.md).
			out, err = primary.Kubectl("apply", "--server-side", "-n", ns, "-f", file)
			if err != nil {
				assert.NotContains(t, out, ".spec.queue", "server-side apply after client-side apply conflicts on the queue")
				assert.Contains(t, out, "conflict with \"kubectl-client-side-apply\"", "unexpected failure:\n%s", out)
				assert.Contains(t, out, ".spec.tasks", "unexpected failure:\n%s", out)
			}
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job))
			assert.Equal(t, "default", job.Spec.Queue, "after the server-side apply")

			// And a fresh server-side create: managedFields show the applier wrote the queue.
			out, err = primary.Kubectl("delete", "-n", ns, "-f", file, "--wait")
			require.NoError(t, err, out)
			out, err = primary.Kubectl("apply", "--server-side", "-n", ns, "-f", file)
			require.NoError(t, err, "server-side create:\n%s", out)
			require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job))
			assert.Equal(t, "default", job.Spec.Queue, "server-side create keeps the written queue")
			_, _ = primary.Kubectl("delete", "-n", ns, "-f", file, "--wait=false")
		})
	}
}

// A Job Volcano's validation refuses is refused with Volcano's message; hyperbatch's webhooks neither
// hide it nor replace it.
func TestTwoWebhooksVolcanoValidationMessage(t *testing.T) {
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	ensureQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue, SchedulerName: "hyperbatch-scheduler"})
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	applyUntilDefaulted(t, writeManifest(t, volcanoJobManifest(t, ns, "probe")), policy, probe)

	bad := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-big"}, Spec: batchv1alpha1.JobSpec{
		MinAvailable: 5, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}}}
	err := c.Create(context.Background(), bad)
	require.Error(t, err, "Volcano's validation must refuse minAvailable > replicas")
	assert.Contains(t, err.Error(), "validatejob.volcano.sh")
	assert.Contains(t, err.Error(), "'minAvailable' should not be greater than total replicas")
}
