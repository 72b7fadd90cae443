package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Pods a workload controller makes for a workload hyperbatch already admitted cost no call to the
// Pod webhooks: the real JobSet controller and kube-controller-manager's Job controller create a
// JobSet's pods in an opted-in, governed namespace, and hyperbatch_webhook_admission_requests_total
// counts no Pod CREATE for them (the entries' objectSelector leaves out pods with the JobSet name
// label, before any conversion). The PodGroup gate (jobset-pod.validate) sees only the pods of a
// gang JobSet (its objectSelector wants the label the JobSet webhook writes on a gang's templates):
// a JobSet that opts out of the gang makes no gate call, a gang JobSet's pods one each (its
// PodGroup is created first, as controllers/podgroup would, which does not run here). A bare Pod
// created afterwards is counted once, so the count is live.
func TestWorkloadPodsCostNoPodWebhookCall(t *testing.T) {
	ctx, cancel := framework.Context(2 * time.Minute)
	defer cancel()
	const ns = "workload-pods-a"
	createNamespace(t, ns, map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	framework.StartJobSetAndJobControllers(t, env)

	podCalls, gateCalls := podCreateCalls(t, "Pod"), podCreateCalls(t, "JobSetPod")
	const want = 6 // 2 Jobs of 3 pods
	run := func(name string, gang bool) {
		t.Helper()
		js := jobSet(ns, name)
		if gang {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: schedulingv1beta1.PodGroupSpec{MinMember: want}}
			require.NoError(t, env.Client.Create(ctx, pg))
		} else {
			js.Annotations = map[string]string{hbv1.GangAnnotation: hbv1.GangAnnotationOptOut}
		}
		js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism = ptr.To[int32](3)
		js.Spec.ReplicatedJobs[0].Template.Spec.Completions = ptr.To[int32](3)
		require.NoError(t, env.Client.Create(ctx, js))
		tmpl := js.Spec.ReplicatedJobs[0].Template.Spec.Template
		require.Equal(t, "team-a", tmpl.Annotations[defaults.QueueNameAnnotation], "hyperbatch's JobSet webhook defaulted the JobSet's pod template")
		if gang {
			require.Equal(t, name, tmpl.Labels[hbv1.JobSetGangLabel], "the JobSet webhook marks a gang's pod templates for the gate")
		} else {
			require.NotContains(t, tmpl.Labels, hbv1.JobSetGangLabel, "a JobSet that is no gang gets no gate label")
		}
		var pods corev1.PodList
		framework.Eventually(t, 90*time.Second, "the JobSet's Jobs to create their pods", func(ctx context.Context) (bool, error) {
			err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name})
			return err == nil && len(pods.Items) == want, err
		})
		for _, p := range pods.Items {
			assert.Equal(t, "team-a", p.Annotations[defaults.QueueNameAnnotation], "pod %s has its template's queue", p.Name)
		}
	}

	run("trainer", false)
	assert.Equal(t, float64(0), podCreateCalls(t, "Pod")-podCalls, "the JobSet's %d pods reached the Pod webhooks", want)
	assert.Equal(t, float64(0), podCreateCalls(t, "JobSetPod")-gateCalls, "the pods of a JobSet that is no gang reached the PodGroup gate")

	run("gang", true)
	assert.Equal(t, float64(0), podCreateCalls(t, "Pod")-podCalls, "the gang JobSet's %d pods reached the Pod webhooks", want)
	assert.Equal(t, float64(want), podCreateCalls(t, "JobSetPod")-gateCalls, "each of the gang JobSet's pods passes the PodGroup gate once")

	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns}, Spec: podSpec()}
	require.NoError(t, env.Client.Create(ctx, bare))
	assert.Equal(t, float64(1), podCreateCalls(t, "Pod")-podCalls, "a bare Pod makes one Pod webhook call")
}

// A Volcano Job's pods cost no call to the Pod webhooks either: Volcano's real job controller
// (vc-controller-manager) creates them in an opted-in, governed namespace once Volcano's real
// scheduler (vc-scheduler, the chart's configuration) has put the Job's PodGroup Inqueue, and
// hyperbatch_webhook_admission_requests_total counts no Pod CREATE for them (the entries'
// objectSelector leaves out pods with the volcano.sh/job-name label) and no PodGroup gate call (it
// is for JobSet pods). A bare Pod created afterwards is counted once, so the count is live.
func TestVolcanoJobPodsCostNoPodWebhookCall(t *testing.T) {
	ctx, cancel := framework.Context(3 * time.Minute)
	defer cancel()
	const ns = "workload-pods-vc"
	createNamespace(t, ns, map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	// The Job's queue (team-a's default): Volcano's queue controller opens it, and vc-scheduler
	// enqueues only PodGroups of an open Queue.
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}}
	require.NoError(t, client.IgnoreAlreadyExists(env.Client.Create(ctx, q)))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), q) })
	framework.StartVolcanoForTest(t, env.Config)

	podCalls, gateCalls := podCreateCalls(t, "Pod"), podCreateCalls(t, "JobSetPod")
	const want = 4
	job := vcJob(ns, "trainer", func(s *batchv1alpha1.JobSpec) {
		s.SchedulerName = "volcano" // a Job on Volcano's own scheduler, which enqueues its PodGroup
		s.MinAvailable = want
		s.Tasks[0].Replicas = want
	})
	require.NoError(t, env.Client.Create(ctx, job))
	require.Equal(t, "team-a", job.Spec.Queue, "hyperbatch's Volcano Job webhook defaulted the Job's queue")
	var pods corev1.PodList
	framework.Eventually(t, 2*time.Minute, "Volcano's job controller to create the Job's pods", func(ctx context.Context) (bool, error) {
		err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job.Name})
		return err == nil && len(pods.Items) == want, err
	})
	for _, p := range pods.Items {
		owner := metav1.GetControllerOf(&p)
		assert.True(t, owner != nil && owner.Kind == "Job" && owner.Name == job.Name, "pod %s is the Volcano Job's (controller %v)", p.Name, owner)
	}
	assert.Equal(t, float64(0), podCreateCalls(t, "Pod")-podCalls, "the Volcano Job's %d pods reached the Pod webhooks", want)
	assert.Equal(t, float64(0), podCreateCalls(t, "JobSetPod")-gateCalls, "the Volcano Job's pods reached the JobSet PodGroup gate")

	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns}, Spec: podSpec()}
	require.NoError(t, env.Client.Create(ctx, bare))
	assert.Equal(t, float64(1), podCreateCalls(t, "Pod")-podCalls, "a bare Pod makes one Pod webhook call")
}

// podCreateCalls counts hyperbatch's webhook calls for CREATEs of kind (Pod: the Pod webhooks;
// JobSetPod: the PodGroup gate).
func podCreateCalls(t *testing.T, kind string) float64 {
	t.Helper()
	return admissionRequests(t, kind, "CREATE", "")
}
