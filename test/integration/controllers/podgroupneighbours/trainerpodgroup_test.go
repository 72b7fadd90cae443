package podgroupneighbours

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Trainer's own PodGroup (podGroupPolicy.volcano, a runtime without networkTopology) in a governed
// namespace: hyperbatch's PodGroup admission gives it the policy's priorityClassName and topology
// with its highestTierName, and the queue comes from the TrainJob's admission. While the TrainJob is
// suspended Trainer server-side-applies (forced) its PodGroup on every reconcile; each reconcile is
// made visible by a label a new runtimePatches entry puts on the JobSet (a real change of the JobSet),
// and the PodGroup's resourceVersion must not move: no write fight over the fields hyperbatch filled,
// the sub-groups the TrainJob's annotations ask for included.
func TestTrainerPodGroupGetsPolicyDefaultsWithoutAWriteFight(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := namespace(t)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "tj-batch"}, Value: 100}
	if err := env.Client.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	pol := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tjpg-" + ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tjpg": ns}},
		Defaults: hbv1.PolicyDefaults{Queue: "tq", PriorityClassName: "tj-batch", SchedulerName: "hyperbatch-scheduler",
			NetworkTopology: &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyMode("hard"), HighestTierName: "rack"}},
	}}
	require.NoError(t, env.Client.Create(ctx, pol))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	labelNamespace(t, ns, map[string]string{"tjpg": ns})

	// What Trainer's sum leaves out: a LimitRange default request and a RuntimeClass's overhead.
	require.NoError(t, env.Client.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}}}}}))
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata-" + ns}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}}
	require.NoError(t, env.Client.Create(ctx, rc))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rc) })

	rt := "hb-volcano-" + ns
	runtime := trainerObject("ClusterTrainingRuntime", "", rt, map[string]any{
		"mlPolicy":       map[string]any{"numNodes": int64(1)},
		"podGroupPolicy": map[string]any{"volcano": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"runtimeClassName": rc.Name,
					"containers": []any{map[string]any{"name": "node", "image": "busybox",
						"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}},
				}}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(ctx, runtime))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), runtime) })

	// The webhook's policy cache has the policy once a dry-run TrainJob comes back with its queue.
	framework.Eventually(t, wait, "the webhook to default a TrainJob in "+ns, func(ctx context.Context) (bool, error) {
		probe := trainerObject("TrainJob", ns, "probe", map[string]any{"runtimeRef": map[string]any{"name": rt}})
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		q, _ := defaults.TrainJobQueue(probe)
		return q == "tq", nil
	})
	tj := trainerObject("TrainJob", ns, "gang", map[string]any{
		"runtimeRef": map[string]any{"name": rt}, "suspend": true, "trainer": map[string]any{"numNodes": int64(2)},
	})
	// Each rank its own sub-group, in one tier-1 domain: the podgroup controller writes them into
	// Trainer's PodGroup, a field Trainer's apply never names.
	tj.SetAnnotations(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByPods, hbv1.SubGroupPodsAnnotation: "1",
		hbv1.SubGroupHighestTierAnnotation: "1"})
	require.NoError(t, env.Client.Create(ctx, tj))

	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gang"}, pg)
		return err == nil, client.IgnoreNotFound(err)
	})
	require.NotNil(t, metav1.GetControllerOf(pg))
	assert.Equal(t, "TrainJob", metav1.GetControllerOf(pg).Kind)
	assert.Equal(t, "tq", pg.Spec.Queue)
	assert.Equal(t, "tj-batch", pg.Spec.PriorityClassName)
	require.NotNil(t, pg.Spec.NetworkTopology, "the policy's topology")
	assert.Equal(t, "rack", pg.Spec.NetworkTopology.HighestTierName)
	assert.Equal(t, int32(2), pg.Spec.MinMember)

	// Priced by hyperbatch: 2 × (300m LimitRange default + 100m overhead) cpu, 2 × (64Mi + 32Mi) memory,
	// where Trainer summed 2 × 64Mi and no cpu.
	framework.Eventually(t, wait, "Trainer's PodGroup priced and with its sub-groups", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg); err != nil {
			return false, err
		}
		return pg.Annotations[hbv1.PricedMinResourcesAnnotation] != "" && len(pg.Spec.SubGroupPolicy) == 2, nil
	})
	require.NotNil(t, pg.Spec.MinResources)
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "800m", corev1.ResourceMemory: "192Mi"} {
		got := (*pg.Spec.MinResources)[name]
		w := resource.MustParse(want)
		assert.Zero(t, w.Cmp(got), "minResources %s: want %s, got %s", name, want, got.String())
	}
	// Round 0 lets the writes that follow the pricing settle (a CI run saw the resourceVersion move
	// once after the price appeared, cause not yet pinned down: status or managedFields); from then on
	// each of Trainer's reconciles must change nothing.
	var pgRV string
	js := &jobsetv1alpha2.JobSet{}
	for i := range 4 {
		label := fmt.Sprintf("round-%d", i)
		// Trainer writes the TrainJob too (status, its own defaults): read, change and update again
		// on a conflict.
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
				return err
			}
			patches, _, _ := unstructured.NestedSlice(tj.Object, "spec", "runtimePatches")
			patches = append(patches, map[string]any{"manager": "example.io/" + label, "trainingRuntimeSpec": map[string]any{
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"round": label}}}}})
			if err := unstructured.SetNestedSlice(tj.Object, patches, "spec", "runtimePatches"); err != nil {
				return err
			}
			return env.Client.Update(ctx, tj)
		}))
		framework.Eventually(t, wait, "Trainer to reconcile the suspended TrainJob ("+label+" on its JobSet)", func(ctx context.Context) (bool, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(tj), js)
			return err == nil && js.Labels["round"] == label, client.IgnoreNotFound(err)
		})
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg))
		if i == 0 {
			pgRV = pg.ResourceVersion
		}
		assert.Equal(t, pgRV, pg.ResourceVersion, "%s: Trainer's forced apply and hyperbatch's admission fought over the PodGroup", label)
		assert.Equal(t, "rack", pg.Spec.NetworkTopology.HighestTierName)
		cpu := (*pg.Spec.MinResources)[corev1.ResourceCPU]
		assert.Equal(t, "800m", cpu.String(), "%s: the price holds against Trainer's re-applied sum", label)
		assert.Len(t, pg.Spec.SubGroupPolicy, 2, "%s: the sub-groups hold against Trainer's forced apply", label)
	}
}
