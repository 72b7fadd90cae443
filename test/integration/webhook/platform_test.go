package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// Through a real apiserver: a DaemonSet's pod and a static pod's mirror in an opted-in, governed
// namespace are not defaulted, while a plain Pod beside them is.
func TestPlatformPodsNotDefaulted(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "platform-a", map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	ds := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds-pod", Namespace: "platform-a", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-agent", UID: "0b5c6d4e-1111-2222-3333-444455556666", Controller: ptr.To(true)}}}, Spec: podSpec()}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static-pod", Namespace: "platform-a",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "0123abcd"}}, Spec: podSpec()}
	mirror.Spec.NodeName = "node-1"
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "platform-a"}, Spec: podSpec()}
	for _, p := range []*corev1.Pod{ds, mirror, plain} {
		require.NoError(t, env.Client.Create(ctx, p), "create %s", p.Name)
	}
	// The positive signal that the webhook ran in this namespace.
	require.Equal(t, "hyperbatch-scheduler", plain.Spec.SchedulerName)
	for _, p := range []*corev1.Pod{ds, mirror} {
		assert.Equal(t, corev1.DefaultSchedulerName, p.Spec.SchedulerName, "%s moved to the policy's scheduler", p.Name)
		assert.Empty(t, p.Spec.PriorityClassName, p.Name)
		assert.NotContains(t, p.Annotations, defaults.QueueNameAnnotation, p.Name)
		assert.NotContains(t, p.Annotations, hbv1.DefaultedByAnnotation, p.Name)
	}
}

// Through a real apiserver: a padded queue is refused with the field and the fix; Karmada's nginx
// sample under a maxClusters-1 policy keeps its two-cluster division and the warning names both.
func TestPaddedQueueAndCoherentDefaults(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "coherent-a", map[string]string{"team": "a"}, nil)
	// Volcano's Job and PodGroup CRDs refuse a padded spec.queue by their own pattern; queue
	// annotations (JobSets, Pods) have no schema, so there the webhook is what refuses them.
	js := jobSet("coherent-a", "padded")
	js.Annotations = map[string]string{defaults.QueueNameAnnotation: " team-a "}
	err := env.Client.Create(ctx, js)
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	assert.Contains(t, err.Error(), `metadata.annotations[scheduling.volcano.sh/queue-name]: Invalid value: " team-a ": `+
		`a queue name has no spaces around it or after "namespace/": Volcano looks the queue up by its exact name; write "team-a"`)

	c, w := warningClient(t)
	pp, err := builders.KarmadaSample("nginx/propagationpolicy.yaml", "coherent-a")
	require.NoError(t, err)
	require.NoError(t, c.Create(ctx, pp))
	assert.Empty(t, pp.Spec.Placement.SpreadConstraints, "team-a's maxClusters 1 voided the sample's two-cluster division")
	assert.True(t, pp.Spec.PropagateDeps, "the policy's other defaults still apply")
	wantContains(t, "warnings", strings.Join(w.Take(), "\n"),
		"hyperbatch: spec.placement.spreadConstraints (maxClusters 1 from WorkloadPolicy team-a) was not defaulted: it would contradict "+
			"the Weighted division in spec.placement.replicaScheduling.weightPreference.staticWeightList, which names 2 clusters (member1, member2)")

	pinned := vcJob("coherent-a", "pinned", func(s *batchv1alpha1.JobSpec) { s.Tasks[0].Template.Spec.NodeName = "node-7" })
	require.NoError(t, c.Create(ctx, pinned))
	assert.Nil(t, pinned.Spec.NetworkTopology)
	assert.Equal(t, "team-a", pinned.Spec.Queue)
	wantContains(t, "warnings", strings.Join(w.Take(), "\n"),
		`spec.networkTopology (networkTopology hard, highestTierAllowed 2 from WorkloadPolicy team-a) was not defaulted: it would contradict spec.tasks[0].template.spec.nodeName "node-7"`)
}

// Through a real apiserver: a WorkloadPolicy whose namespaceSelector could not be applied is
// refused by the validating webhook, naming the field and the fix.
func TestWorkloadPolicyInvalidSelectorRefused(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	p := builders.MakePolicy("lower-case-in").Obj()
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "in", Values: []string{"a"}}}}
	err := env.Client.Create(ctx, p)
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	assert.Contains(t, err.Error(), `admission webhook "workloadpolicy.validate.hyperbatch.dev" denied the request: WorkloadPolicy.hyperbatch.dev "lower-case-in" is invalid: `+
		`spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "in": must be one of In, NotIn, Exists, DoesNotExist (operators are case-sensitive: write In)`)
}

// podGroupUpdates sums hyperbatch_webhook_admission_requests_total over every result for PodGroup
// UPDATEs and one webhook ("mutating", "validating", or "" for both).
func podGroupUpdates(t *testing.T, webhook string) float64 {
	t.Helper()
	return admissionRequests(t, "PodGroup", "UPDATE", webhook)
}

// admissionRequests sums hyperbatch_webhook_admission_requests_total over every result for
// operations on kind and one webhook ("mutating", "validating", or "" for both).
func admissionRequests(t *testing.T, kind, operation, webhook string) float64 {
	t.Helper()
	labels := map[string]string{"kind": kind, "operation": operation}
	if webhook != "" {
		labels["webhook"] = webhook
	}
	v, err := framework.ControllerMetric("hyperbatch_webhook_admission_requests_total", labels)
	require.NoError(t, err)
	return v
}

// A PodGroup's status is written with plain updates (its CRD has no status subresource). Those
// writes, and label changes, reach no hyperbatch webhook (matchConditions); a spec change reaches
// both. Webhook calls are made within the write, so each count is complete when its write returns.
// The spec change's count is at least one call per webhook, not exactly one: a full-suite run under
// load once counted three calls, likely a retry (the apiserver retries a webhook call whose
// connection was reset, and each attempt reaches the handler).
func TestStatusWritesCostNoWebhookCall(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "status-a", map[string]string{"team": "a"}, nil)
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "status-a"}, Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1}}
	require.NoError(t, env.Client.Create(ctx, pg))
	require.Equal(t, "team-a", pg.Spec.Queue)
	before := podGroupUpdates(t, "")
	const writes = 20
	for i := range writes {
		pg.Status.Running = int32(i)
		pg.Status.Phase = schedulingv1beta1.PodGroupRunning
		require.NoError(t, env.Client.Update(ctx, pg))
	}
	pg.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, env.Client.Update(ctx, pg))
	assert.Equal(t, float64(0), podGroupUpdates(t, "")-before, "%d status writes and a label change reached hyperbatch's webhooks", writes)

	mutating, validating := podGroupUpdates(t, "mutating"), podGroupUpdates(t, "validating")
	pg.Spec.MinMember = 2
	require.NoError(t, env.Client.Update(ctx, pg))
	assert.GreaterOrEqual(t, podGroupUpdates(t, "mutating")-mutating, float64(1), "the spec change did not reach the mutating webhook")
	assert.GreaterOrEqual(t, podGroupUpdates(t, "validating")-validating, float64(1), "the spec change did not reach the validating webhook")
}

// Through a real apiserver: in a namespace no WorkloadPolicy governs (labelled
// pod-webhook=disabled, so the JobSet entries skip it), a JobSet that is a gang on its own (a pod
// template naming volcano, or Volcano's queue annotation) still gets scheduling.k8s.io/group-name on
// its pod templates, so its pods join the PodGroup controllers/podgroup makes; a plain JobSet there
// never reaches hyperbatch.
func TestSelfDeclaredGangJobSetInUngovernedNamespace(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "ungoverned-js", map[string]string{hbv1.PodWebhookLabel: hbv1.PodWebhookLabelDisabled}, nil)

	byScheduler := jobSet("ungoverned-js", "by-scheduler")
	byScheduler.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.SchedulerName = defaults.VolcanoSchedulerName
	byQueue := jobSet("ungoverned-js", "by-queue")
	byQueue.Annotations = map[string]string{defaults.QueueNameAnnotation: "shared"}
	plain := jobSet("ungoverned-js", "plain")
	for _, js := range []*jobsetv1alpha2.JobSet{byScheduler, byQueue, plain} {
		require.NoError(t, env.Client.Create(ctx, js), "create JobSet %s", js.Name)
	}
	for _, js := range []*jobsetv1alpha2.JobSet{byScheduler, byQueue} {
		got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations[defaults.GroupNameAnnotation]
		assert.Equal(t, js.Name, got, "JobSet %s is a gang on its own: its pod template must join PodGroup %s", js.Name, js.Name)
	}
	assert.Empty(t, plain.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations[defaults.GroupNameAnnotation])
	assert.NotContains(t, plain.Annotations, hbv1.DefaultedByAnnotation, "a plain JobSet in an ungoverned namespace gets nothing from hyperbatch")
}
