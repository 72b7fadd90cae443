package podgroupneighbours

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// A TrainJob whose ClusterTrainingRuntime names hyperbatch-scheduler: Trainer's controller (v2.3.0)
// creates its JobSet, which becomes a gang: the PodGroup (minMember = the TrainJob's numNodes,
// minResources from the runtime's container), controlled by the JobSet, exists before the first pod
// the JobSet and Job controllers create, and every pod is in the gang.
func TestTrainJobBecomesAGang(t *testing.T) {
	startTrainer(t)

	ctx := context.Background()
	ns := namespace(t)
	runtimeName := "hb-gang-" + ns
	rt := trainerObject("ClusterTrainingRuntime", "", runtimeName, map[string]any{
		"mlPolicy": map[string]any{"numNodes": int64(1)},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"schedulerName": podgroup.HyperbatchSchedulerName,
					"containers": []any{map[string]any{"name": "node", "image": "busybox",
						"resources": map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "256Mi"}}}},
				}}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(ctx, rt))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })

	rec := watchOrder(t, ns)
	tj := trainerObject("TrainJob", ns, "llm", map[string]any{
		"runtimeRef": map[string]any{"name": runtimeName, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
		"trainer":    map[string]any{"numNodes": int64(3)},
	})
	require.NoError(t, env.Client.Create(ctx, tj))

	// Trainer's JobSet, owned by the TrainJob, in the gang (the JobSet webhook's group name).
	js := &jobsetv1alpha2.JobSet{}
	framework.Eventually(t, wait, "Trainer's controller to create the TrainJob's JobSet", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm"}, js)
		return err == nil, client.IgnoreNotFound(err)
	})
	owner := metav1.GetControllerOf(js)
	require.NotNil(t, owner, "the JobSet has no controller")
	assert.Equal(t, "TrainJob", owner.Kind)
	require.Len(t, js.Spec.ReplicatedJobs, 1)
	assert.Equal(t, "llm", js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations[defaults.GroupNameAnnotation])

	pg, pods := waitRunningGang(t, ns, "llm", 3)
	assert.True(t, metav1.IsControlledBy(pg, js), "the PodGroup is controlled by the JobSet: %+v", pg.OwnerReferences)
	assert.Equal(t, int32(3), pg.Spec.MinMember)
	require.NotNil(t, pg.Spec.MinResources)
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "1500m", corev1.ResourceMemory: "768Mi"} {
		got := (*pg.Spec.MinResources)[name]
		w := resource.MustParse(want)
		assert.Zero(t, w.Cmp(got), "PodGroup minResources %s: want %s, got %s", name, want, got.String())
	}
	assert.Equal(t, podgroup.DefaultQueue, pg.Spec.Queue)
	rec.assertPodGroupFirst(t, pg, pods)
	var all schedulingv1beta1.PodGroupList
	require.NoError(t, env.Client.List(ctx, &all, client.InNamespace(ns)))
	assert.Len(t, all.Items, 1, "one PodGroup for the TrainJob (Trainer v2.3.0 makes none without a podGroupPolicy)")
}
