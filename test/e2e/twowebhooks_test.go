//go:build e2e

package e2e

// Two mutating webhooks on one Volcano Job: hyperbatch's and Volcano's own (webhook-manager), both
// installed by the local cluster. See docs/webhooks.md, "Two mutating webhooks on one Volcano Job".

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
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
	dir, err := builders.VolcanoModuleDir()
	require.NoError(t, err)
	return dir
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

	pgs := recordPodGroups(t, ns)
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
			// The PodGroup Volcano's job controller makes for it follows the Job: `default`, not the
			// policy's queue.
			pg := jobPodGroup(t, pgs, &job)
			assert.Equal(t, "default", pg.Spec.Queue, "the Job's PodGroup is in another queue than its Job")
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
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: e2efw.Workload().Image}}}}}}}}
	err := c.Create(context.Background(), bad)
	require.Error(t, err, "Volcano's validation must refuse minAvailable > replicas")
	assert.Contains(t, err.Error(), "validatejob.volcano.sh")
	assert.Contains(t, err.Error(), "'minAvailable' should not be greater than total replicas")
}

// jobPodGroup waits for the PodGroup Volcano's job controller makes for job (named <job>-<uid>).
// podGroupRecorder keeps every PodGroup a watch opened before the Jobs were created saw in a
// namespace, as first seen: Volcano's job controller deletes a Job's PodGroup as soon as the Job
// completes, and kwok completes a one-pod Job within a second, faster than a poll can be sure to see.
type podGroupRecorder struct {
	mu   sync.Mutex
	seen map[string]*schedulingv1beta1.PodGroup
}

// recordPodGroups opens the watch on PodGroups in ns; call it before creating the Jobs.
func recordPodGroups(t *testing.T, ns string) *podGroupRecorder {
	t.Helper()
	r := &podGroupRecorder{seen: map[string]*schedulingv1beta1.PodGroup{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &schedulingv1beta1.PodGroupList{}, client.InNamespace(ns))
	require.NoError(t, err, "watching PodGroups in %s", ns)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if pg, ok := ev.Object.(*schedulingv1beta1.PodGroup); ok {
				r.mu.Lock()
				if _, ok := r.seen[pg.Name]; !ok {
					r.seen[pg.Name] = pg.DeepCopy()
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// jobPodGroup waits for the PodGroup Volcano's job controller made for job, as first stored.
func jobPodGroup(t *testing.T, r *podGroupRecorder, job *batchv1alpha1.Job) *schedulingv1beta1.PodGroup {
	t.Helper()
	name := job.Name + "-" + string(job.UID)
	var pg *schedulingv1beta1.PodGroup
	e2efw.Poll(t, 60*time.Second, "Volcano's job controller to create PodGroup "+job.Namespace+"/"+name, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		pg = r.seen[name]
		return pg != nil, nil
	})
	return pg
}

// topologyJobManifest is a one-pod hyperbatch-scheduler Volcano Job whose networkTopology names tier.
func topologyJobManifest(ns, name, tier string) string {
	nodes := e2efw.Workload()
	return fmt.Sprintf(`apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: %s
  namespace: %s
spec:
  minAvailable: 1
  schedulerName: hyperbatch-scheduler
  networkTopology: {mode: hard, highestTierName: %s}
  tasks:
  - name: w
    replicas: 1
    template:
      spec:
        restartPolicy: Never
%s        containers:
        - name: w
          image: %s
          resources: {requests: {cpu: 100m, memory: 64Mi}}
`, name, ns, tier, nodes.PodSpecYAML(8), nodes.Image)
}

// A Volcano Job's highestTierName reaches its PodGroup through Volcano's real job controller (which
// drops it) and hyperbatch's PodGroup webhook (which restores it from the Job): a Job confined to a
// spine gets a PodGroup confined to it and runs; a typo waits with the scheduler's GangWaiting Event
// on its PodGroup, as the same typo on a PodGroup does.
func TestTwoWebhooksPodGroupFollowsJobTopology(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	ensureQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue})
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	applyUntilDefaulted(t, writeManifest(t, volcanoJobManifest(t, ns, "probe")), policy, probe)

	pgs := recordPodGroups(t, ns)
	for _, tier := range []string{"spine", "spnie"} {
		name := "tier-" + tier
		out, err := primary.Kubectl("apply", "-f", writeManifest(t, topologyJobManifest(ns, name, tier)))
		require.NoError(t, err, out)
		var job batchv1alpha1.Job
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job))
		require.Equal(t, tier, job.Spec.NetworkTopology.HighestTierName)
		pg := jobPodGroup(t, pgs, &job)
		assert.Equal(t, queue, pg.Spec.Queue, "the PodGroup's queue is its Job's")
		require.NotNil(t, pg.Spec.NetworkTopology)
		assert.Equal(t, tier, pg.Spec.NetworkTopology.HighestTierName, "the Job's highestTierName did not reach its PodGroup")
	}
	e2efw.Poll(t, 90*time.Second, "the spine-confined Job's pod to run", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: "tier-spine"}); err != nil {
			return false, err
		}
		return len(pods.Items) == 1 && pods.Items[0].Spec.NodeName != "", nil
	})
	var typo batchv1alpha1.Job
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tier-spnie"}, &typo))
	pgName := "tier-spnie-" + string(typo.UID)
	var notes []string
	e2efw.Poll(t, 90*time.Second, "a GangWaiting Event naming the typo on PodGroup "+pgName, func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		notes = notes[:0]
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != "PodGroup" || e.InvolvedObject.Name != pgName {
				continue
			}
			notes = append(notes, e.Reason+": "+e.Message)
			if e.Reason == "GangWaiting" && strings.Contains(e.Message, `highestTierName "spnie" matches no HyperNode tierName`) {
				return true, nil
			}
		}
		return false, nil
	})
}

// When Volcano's job webhook and hyperbatch's both refuse a Job, the user sees Volcano's refusal,
// every time (the apiserver's validating calls run in parallel and the first refusal back would
// win), and no "hyperbatch: defaulted" warning beside it. A Job only hyperbatch refuses gets
// hyperbatch's refusal, again without the warning.
func TestTwoWebhooksVolcanoRefusalWins(t *testing.T) {
	ns := primary.Namespace(t)
	queue := "journey-" + ns
	ensureQueue(t, queue)
	other := "other-" + ns
	ensureQueue(t, other) // Open, and not allowed: only hyperbatch refuses it
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refusal-" + ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Defaults:          hbv1.PolicyDefaults{Queue: queue, SchedulerName: "hyperbatch-scheduler"},
		AllowedQueues:     []string{queue},
	}}
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	applyUntilDefaulted(t, writeManifest(t, volcanoJobManifest(t, ns, "probe")), p.Name, probe)

	withQueue := func(name, q string) string { // the manifest's text
		m := strings.Replace(volcanoJobManifest(t, ns, name), "spec:\n  minAvailable: 9\n", "spec:\n  minAvailable: 9\n  queue: "+q+"\n", 1)
		require.Contains(t, m, "queue: "+q)
		return m
	}
	both := map[string]string{
		// Volcano: no such Queue; hyperbatch: not allowed.
		"missing queue": writeManifest(t, withQueue("missing", "missing-"+ns)),
		// Volcano: minAvailable above the tasks' replicas; hyperbatch: not allowed.
		"min above replicas": writeManifest(t, strings.Replace(withQueue("toobig", other), "minAvailable: 9", "minAvailable: 12", 1)),
	}
	for name, file := range both {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 8; i++ {
				out, err := primary.Kubectl("create", "-f", file)
				require.Error(t, err, "created:\n%s", out)
				assert.Contains(t, out, `admission webhook "validatejob.volcano.sh" denied the request`, "try %d", i)
				assert.NotContains(t, out, "volcanojob.validate.hyperbatch.dev", "try %d: hyperbatch's refusal was shown", i)
				assert.NotContains(t, out, "hyperbatch: defaulted", "try %d: a defaulted warning on a refused request", i)
			}
		})
	}
	out, err := primary.Kubectl("create", "-f", writeManifest(t, withQueue("onlyours", other)))
	require.Error(t, err, out)
	assert.Contains(t, out, fmt.Sprintf(`spec.queue: Forbidden: queue %q is not allowed`, other), "hyperbatch's refusal")
	assert.NotContains(t, out, "validatejob.volcano.sh")
	assert.NotContains(t, out, "hyperbatch: defaulted", "a defaulted warning on a request hyperbatch refuses")
}
