package podgroupneighbours

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// startTrainer starts the JobSet and Job controllers and Trainer's controller manager (the version
// hack/tools/trainer pins) for the test.
func startTrainer(t *testing.T) {
	t.Helper()
	framework.StartJobSetAndJobControllers(t, env.Env)
	framework.StartNeighbourForTest(t, env.Config, framework.StartTrainerController, framework.NeighbourOptions{})
}

// trainerExample reads one of the example manifests of the pinned Trainer module (examples/yaml), as
// a user applies it: every object, the namespaced ones put in ns.
func trainerExample(t *testing.T, name, ns string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := framework.TrainerModuleDir()
	require.NoError(t, err)
	out := framework.ReadObjects(t, filepath.Join(dir, "examples", "yaml", name))
	for _, u := range out {
		if u.GetKind() != "ClusterTrainingRuntime" {
			u.SetNamespace(ns)
		}
	}
	require.NotEmpty(t, out, "%s has no objects", name)
	return out
}

// Trainer's own Volcano example (examples/yaml/04-volcano-integration.yaml of the pinned module, as
// published), applied as a user would: Trainer v2.3.0's Volcano runtime plugin makes a PodGroup with
// the TrainJob's name, controlled by the TrainJob, that counts every node (minMember 4, minResources
// 4 × resourcesPerNode.requests), and puts the JobSet's pods in it. Trainer v2.0.0 had no Volcano
// plugin: no PodGroup.
func TestTrainerVolcanoExample(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := namespace(t)
	objs := trainerExample(t, "04-volcano-integration.yaml", ns)
	var tj *unstructured.Unstructured
	for _, o := range objs {
		require.NoError(t, env.Client.Create(ctx, o), "%s %s", o.GetKind(), o.GetName())
		if o.GetKind() == "ClusterTrainingRuntime" {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
		if o.GetKind() == "TrainJob" {
			tj = o
		}
	}
	require.NotNil(t, tj, "the example has a TrainJob")

	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup for the TrainJob", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.GetName()}, pg)
		return err == nil, client.IgnoreNotFound(err)
	})
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(tj), tj))
	owner := metav1.GetControllerOf(pg)
	require.NotNil(t, owner, "the PodGroup has no controller")
	assert.Equal(t, "TrainJob", owner.Kind)
	assert.Equal(t, tj.GetUID(), owner.UID)
	assert.Equal(t, int32(4), pg.Spec.MinMember)
	require.NotNil(t, pg.Spec.MinResources)
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi"} {
		got := (*pg.Spec.MinResources)[name]
		w := resource.MustParse(want)
		assert.Zero(t, w.Cmp(got), "PodGroup minResources %s: want %s, got %s", name, want, got.String())
	}

	js := &jobsetv1alpha2.JobSet{}
	framework.Eventually(t, wait, "Trainer's JobSet for the TrainJob", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.GetName()}, js)
		return err == nil, client.IgnoreNotFound(err)
	})
	require.Len(t, js.Spec.ReplicatedJobs, 1)
	assert.Equal(t, tj.GetName(), js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations[defaults.GroupNameAnnotation],
		"the pods are in Trainer's PodGroup")
}
