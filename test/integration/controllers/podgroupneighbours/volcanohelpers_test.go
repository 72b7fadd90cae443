package podgroupneighbours

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// startVolcanoControllers starts Volcano's real vc-controller-manager (its job controller among
// them) for the test.
func startVolcanoControllers(t *testing.T) {
	t.Helper()
	framework.StartNeighbourForTest(t, env.Config, framework.StartVolcanoControllers, framework.NeighbourOptions{})
}

// ensureQueue creates Volcano's Queue name (weight 1) unless it exists: Volcano's job controller
// makes a Job's PodGroup only once the Job's Queue exists.
func ensureQueue(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(context.Background(), &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedulingv1beta1.QueueSpec{Weight: 1}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// labelNamespace sets the labels of namespace ns to labels.
func labelNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	var nsObj corev1.Namespace
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj))
	nsObj.Labels = labels
	require.NoError(t, env.Client.Update(ctx, &nsObj))
}

// volcanoJobPodGroup waits for the PodGroup Volcano's job controller makes for job (named
// <job>-<uid>) and returns it.
func volcanoJobPodGroup(t *testing.T, job *batchv1alpha1.Job) *schedulingv1beta1.PodGroup {
	t.Helper()
	key := client.ObjectKey{Namespace: job.Namespace, Name: job.Name + "-" + string(job.UID)}
	var pg schedulingv1beta1.PodGroup
	framework.Eventually(t, wait, "Volcano's job controller to create PodGroup "+key.String(), func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &pg)
		return err == nil, client.IgnoreNotFound(err)
	})
	return &pg
}
