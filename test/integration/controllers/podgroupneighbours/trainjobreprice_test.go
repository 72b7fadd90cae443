package podgroupneighbours

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// A suspended TrainJob (podGroupPolicy.volcano, 3 nodes, no requests: cpu from the LimitRange, 100m)
// is resumed in the same instant as the LimitRange's default goes to 250m, with the real Trainer
// (v2.3.0), JobSet and Job controllers. The podgroup controller's PodGroup writes are held at its
// transport until the pods exist, and the PodGroup is touched meanwhile (as Trainer's or any other
// writer's apply would), so the held re-price, guarded by resourceVersion, conflicts: the price is
// decided again once the pods exist, the order a loaded controller gives (seen in CI). The final
// price equals the sum of what the pods actually ask. Before the price followed the pods, the gang
// kept 3 × 100m (MinResourcesKept) for pods asking 3 × 250m.
func TestTrainJobResumedInTheInstantOfALimitRangeChange(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := namespace(t)
	lr := cpuDefault(ns, "100m")
	require.NoError(t, env.Client.Create(ctx, lr))
	rt := "hb-race-" + ns
	volcanoRuntime(t, rt, nil)

	const name = "race"
	tj := trainerObject("TrainJob", ns, name, map[string]any{
		"runtimeRef": map[string]any{"name": rt}, "suspend": true, "trainer": map[string]any{"numNodes": int64(3)},
	})
	require.NoError(t, env.Client.Create(ctx, tj))
	waitPriced(t, ns, name, cpuList("300m"), "Trainer's PodGroup priced at 3 × 100m while suspended")
	waitJobSuspended(t, ns, name)

	hold.Hold()
	t.Cleanup(hold.Release)
	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("250m") }))
	require.NoError(t, mutate(ctx, tj, func() { _ = unstructured.SetNestedField(tj.Object, false, "spec", "suspend") }))
	pods := waitPods(t, ns, name, 3)
	pg := &schedulingv1beta1.PodGroup{}
	pg.Namespace, pg.Name = ns, name
	require.NoError(t, mutate(ctx, pg, func() {
		if pg.Labels == nil {
			pg.Labels = map[string]string{}
		}
		pg.Labels["hyperbatch.dev/test-touched"] = "while-held"
	}))
	t.Logf("the pods exist; %d PodGroup writes held", hold.Blocked())
	hold.Release()

	ask := framework.PodsAsk(pods)
	for _, p := range pods {
		cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		t.Logf("pod %s asks cpu %s", p.Name, cpu.String())
		assert.Equal(t, name, p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in Trainer's PodGroup", p.Name)
	}
	waitPriced(t, ns, name, ask, "Trainer's PodGroup priced at what its pods ask, "+defaults.FormatResourceList(ask))
	cur, err := jobSetPods(ctx, ns, name)
	require.NoError(t, err)
	assert.Len(t, cur, 3, "the gang's pods changed while it was re-priced")
}

// Trainer keeps its PodGroup while the TrainJob is suspended, and the PodGroup status controller
// does not serve a PodGroup with no pod (and no Volcano Job): one that sees the suspended gang's pods
// all gone at once (after a manager restart, or when they leave between two of its passes) leaves it
// Running. With the real Trainer (v2.3.0), JobSet and Job controllers and the PodGroup status
// controller, a TrainJob of 3 nodes whose pods are bound by nodeName (hyperbatch-scheduler's, so the
// status controller serves the PodGroup) runs: the PodGroup is Running at 3 × 200m. The status
// controller stops (its manager going away), the TrainJob is suspended (the test plays the node's
// kubelet and finishes the pods' deletion), so the PodGroup is Running with no pod, and the
// LimitRange's default goes to 250m: the PodGroup is re-priced to 3 × 250m while suspended (before,
// the Running phase kept the old price for good), and on resume it equals what the pods ask.
func TestTrainerPodGroupRunningThenSuspendedIsRepriced(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := namespace(t)
	lr := cpuDefault(ns, "200m")
	require.NoError(t, env.Client.Create(ctx, lr))
	node := ns + "-n0"
	framework.CreateReadyNode(t, cs, builders.MakeNode(node).Label("hb-test", ns).Taint("hb-test", ns, corev1.TaintEffectNoSchedule).Obj(),
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")})
	stopStatus := startPodGroupStatus(t)
	rt := "hb-rerun-" + ns
	volcanoRuntime(t, rt, map[string]any{
		"schedulerName": "hyperbatch-scheduler",
		"nodeName":      node,
		"tolerations":   []any{map[string]any{"key": "hb-test", "operator": "Equal", "value": ns, "effect": "NoSchedule"}},
	})

	const name = "rerun"
	tj := trainerObject("TrainJob", ns, name, map[string]any{
		"runtimeRef": map[string]any{"name": rt}, "trainer": map[string]any{"numNodes": int64(3)},
	})
	require.NoError(t, env.Client.Create(ctx, tj))
	waitPods(t, ns, name, 3)
	waitPriced(t, ns, name, cpuList("600m"), "Trainer's PodGroup priced at 3 × 200m")
	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup Running", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
		return err == nil && pg.Status.Phase == schedulingv1beta1.PodGroupRunning, err
	})

	stopStatus()
	require.NoError(t, mutate(ctx, tj, func() { _ = unstructured.SetNestedField(tj.Object, true, "spec", "suspend") }))
	waitJobSuspended(t, ns, name)
	// The Job controller deleted the pods; bound to a node, they wait for its kubelet, played here.
	framework.Eventually(t, wait, "the suspended TrainJob's pods gone", func(ctx context.Context) (bool, error) {
		pods, err := jobSetPods(ctx, ns, name)
		if err != nil {
			return false, err
		}
		for i := range pods {
			if !pods[i].DeletionTimestamp.IsZero() {
				if err := env.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
					return false, err
				}
			}
		}
		return len(pods) == 0, nil
	})
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg))
	assert.Equal(t, schedulingv1beta1.PodGroupRunning, pg.Status.Phase, "the case under test: Trainer's PodGroup of a suspended TrainJob keeps its Running phase")

	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("250m") }))
	waitPriced(t, ns, name, cpuList("750m"), "the suspended TrainJob's PodGroup re-priced at 3 × 250m")
	pods, err := jobSetPods(ctx, ns, name)
	require.NoError(t, err)
	require.Empty(t, pods, "pods of the suspended TrainJob")

	require.NoError(t, mutate(ctx, tj, func() { _ = unstructured.SetNestedField(tj.Object, false, "spec", "suspend") }))
	pods = waitPods(t, ns, name, 3)
	ask := framework.PodsAsk(pods)
	assert.True(t, defaults.SameResourceList(&ask, cpuList("750m")), "the resumed pods ask %s, want 3 × the LimitRange's 250m", defaults.FormatResourceList(ask))
	waitPriced(t, ns, name, ask, "Trainer's PodGroup priced at what its pods ask once resumed")
}
