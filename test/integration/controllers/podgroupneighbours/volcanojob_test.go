package podgroupneighbours

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// A Volcano Job's PodGroup, made by Volcano's real job controller (vc-controller-manager,
// v1.14.0-alpha.0), follows its Job through hyperbatch's PodGroup webhook: a Job applied with
// `queue: default` (kept, the user wrote it) in a namespace whose policy names another queue gets a
// PodGroup in `default` too, not the policy's queue, and the Job's highestTierName, which that
// controller drops, is on the PodGroup.
func TestVolcanoJobPodGroupFollowsItsJob(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	queue := "policy-" + ns
	policy := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Defaults:          hbv1.PolicyDefaults{Queue: queue},
	}}
	require.NoError(t, env.Client.Create(ctx, policy))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), policy) })

	// Positive signal first: the webhook has the policy (a PodGroup of no Job gets its queue).
	framework.Eventually(t, wait, "the webhook to default a probe PodGroup from the policy", func(ctx context.Context) (bool, error) {
		probe := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1}}
		if err := env.Client.Create(ctx, probe); err != nil {
			return false, err
		}
		return probe.Spec.Queue == queue, env.Client.Delete(ctx, probe)
	})

	// Volcano's job controller makes a Job's PodGroup only once the Job's Queue exists.
	ensureQueue(t, "default")

	startVolcanoControllers(t)

	for _, tc := range []struct{ name, tier string }{{"block-job", "block"}, {"typo-job", "blokc"}} {
		job := tierJob(ns, tc.name, tc.tier)
		// A server-side apply: the request shows the user wrote `queue: default`, so the Job keeps it.
		//nolint:staticcheck // client.Apply with a typed object is the simplest server-side apply here.
		require.NoError(t, env.Client.Patch(ctx, job, client.Apply, client.FieldOwner("test"), client.ForceOwnership))
		require.Equal(t, "default", job.Spec.Queue, "the Job keeps the queue its user wrote")
		pg := volcanoJobPodGroup(t, job)
		assert.Equal(t, "default", pg.Spec.Queue, "the PodGroup is in another queue than its Job")
		require.NotNil(t, pg.Spec.NetworkTopology)
		assert.Equal(t, schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierName: tc.tier}, *pg.Spec.NetworkTopology,
			"the PodGroup lost its Job's highestTierName")
		assert.Equal(t, "vcjob:"+tc.name+"/networkTopology", pg.Annotations[hbv1.DefaultedByAnnotation])
		require.NotNil(t, metav1.GetControllerOf(pg))
		assert.Equal(t, job.UID, metav1.GetControllerOf(pg).UID)
	}
}

// In a namespace no WorkloadPolicy governs (the namespacelabel controller labels it
// hyperbatch.dev/pod-webhook=disabled, and the workload webhooks skip it), a Volcano Job's PodGroup
// still gets the Job's highestTierName, which Volcano's real job controller drops: a rack gang stays
// a rack gang, and a typo reaches the scheduler, which holds the gang with an Event
// (test/integration/scheduler, "per tree"), instead of a bare {mode: hard}.
func TestVolcanoJobPodGroupKeepsTierNameWithoutPolicy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	labelNamespace(t, ns, map[string]string{hbv1.PodWebhookLabel: hbv1.PodWebhookLabelDisabled})
	ensureQueue(t, "default")

	startVolcanoControllers(t)

	for _, tc := range []struct{ name, tier string }{{"rack-job", "rack"}, {"typo-job", "nvl-rak"}} {
		job := tierJob(ns, tc.name, tc.tier)
		require.NoError(t, env.Client.Create(ctx, job))
		pg := volcanoJobPodGroup(t, job)
		require.NotNil(t, pg.Spec.NetworkTopology)
		assert.Equal(t, schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierName: tc.tier}, *pg.Spec.NetworkTopology,
			"the PodGroup of a Job in an ungoverned namespace lost its Job's highestTierName")
		assert.Equal(t, "vcjob:"+tc.name+"/networkTopology", pg.Annotations[hbv1.DefaultedByAnnotation])
	}
}

// tierJob is a one-pod Volcano Job in queue default for hyperbatch-scheduler whose hard network
// topology names the tier.
func tierJob(ns, name, tier string) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1alpha1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1alpha1.JobSpec{
			Queue: "default", SchedulerName: "hyperbatch-scheduler", MinAvailable: 1,
			NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierName: tier},
			Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}},
		},
	}
}
