package podgroupneighbours

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// A TrainJob whose runtime has podGroupPolicy.volcano, created suspended with
// activeDeadlineSeconds, with the real Trainer (v2.3.0), JobSet and Job controllers:
//   - while suspended, Trainer's PodGroup exists and hyperbatch prices it from the namespace's
//     LimitRange (3 pods × 100m), and no pod exists (positive signal: the Job controller marked the
//     JobSet's Job Suspended);
//   - the TrainJob stays suspended longer than its deadline and is not failed (Trainer's clock
//     stops on suspend; positive signal: a Trainer reconcile after that moment, seen as a label a new
//     runtimePatches entry puts on the JobSet);
//   - the LimitRange's default changes to 250m and the TrainJob is resumed at once: the PodGroup
//     carries 3 × 250m = 750m before the first pod is created (watch order) and every pod asks
//     250m, the hand calculation;
//   - the deadline counts from the resume: the TrainJob is Failed with DeadlineExceeded no earlier
//     than activeDeadlineSeconds after it (a clock counted from the creation would have failed it at
//     the resume), and its JobSet and pods are gone.
func TestTrainJobSuspendResumeWithVolcanoPodGroup(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := namespace(t)
	lr := cpuDefault(ns, "100m")
	require.NoError(t, env.Client.Create(ctx, lr))

	rt := "hb-suspend-" + ns
	volcanoRuntime(t, rt, nil)

	const name, deadline = "sr", 15
	tj := trainerObject("TrainJob", ns, name, map[string]any{
		"runtimeRef": map[string]any{"name": rt}, "suspend": true, "activeDeadlineSeconds": int64(deadline),
		"trainer": map[string]any{"numNodes": int64(3)},
	})
	require.NoError(t, env.Client.Create(ctx, tj))
	created := time.Now()

	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup priced at 3 × 100m while suspended", func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil || pg.Spec.MinResources == nil {
			return false, client.IgnoreNotFound(err)
		}
		cpu := (*pg.Spec.MinResources)[corev1.ResourceCPU]
		want := resource.MustParse("300m")
		return want.Cmp(cpu) == 0 && pg.Annotations[hbv1.PricedMinResourcesAnnotation] != "", nil
	})
	require.NotNil(t, metav1.GetControllerOf(pg))
	assert.Equal(t, "TrainJob", metav1.GetControllerOf(pg).Kind)
	assert.Equal(t, int32(3), pg.Spec.MinMember)
	waitJobSuspended(t, ns, name)
	pods, err := jobSetPods(ctx, ns, name)
	require.NoError(t, err)
	require.Empty(t, pods, "pods of a suspended TrainJob")

	// Suspended past its deadline: a Trainer reconcile after that moment leaves it running.
	time.Sleep(time.Until(created.Add((deadline + 2) * time.Second)))
	require.NoError(t, mutate(ctx, tj, func() {
		patches, _, _ := unstructured.NestedSlice(tj.Object, "spec", "runtimePatches")
		patches = append(patches, map[string]any{"manager": "example.io/late", "trainingRuntimeSpec": map[string]any{
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"late": "yes"}}}}})
		_ = unstructured.SetNestedSlice(tj.Object, patches, "spec", "runtimePatches")
	}))
	js := &jobsetv1alpha2.JobSet{}
	framework.Eventually(t, wait, "Trainer to reconcile the suspended TrainJob past its deadline", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(tj), js)
		return err == nil && js.Labels["late"] == "yes", client.IgnoreNotFound(err)
	})
	cur, err := getTrainJob(ctx, ns, name)
	require.NoError(t, err)
	require.Nil(t, workload.TrainJobFinishedAt(cur), "Trainer counted the deadline while the TrainJob was suspended")

	// The LimitRange changes while suspended: with no pod yet, the PodGroup is re-priced before the
	// resume. (Resumed within a controller hop of the LimitRange write, the pods can come first; the
	// price then follows them: TestTrainJobResumedInTheInstantOfALimitRangeChange.)
	rec := watchGang(t, ns, name)
	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("250m") }))
	framework.Eventually(t, wait, "the suspended TrainJob's PodGroup re-priced at 3 × 250m", func(context.Context) (bool, error) {
		return rec.Snapshot().FirstPrice("750m") != 0, nil
	})
	resumed := time.Now()
	require.NoError(t, mutate(ctx, tj, func() { _ = unstructured.SetNestedField(tj.Object, false, "spec", "suspend") }))

	framework.Eventually(t, wait, "the 3 pods of the resumed TrainJob", func(ctx context.Context) (bool, error) {
		pods, err = jobSetPods(ctx, ns, name)
		return len(pods) == 3, err
	})
	for _, p := range pods {
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		perPod := resource.MustParse("250m")
		assert.Zero(t, perPod.Cmp(got), "pod %s admitted with cpu %s, want the LimitRange's 250m", p.Name, got.String())
		assert.Equal(t, name, p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in Trainer's PodGroup", p.Name)
	}
	framework.Eventually(t, 10*time.Second, "the watch to deliver the pods' creation", func(context.Context) (bool, error) {
		return len(rec.Snapshot().Created) == 3, nil
	})
	snap := rec.Snapshot()
	priced, firstPod := snap.FirstPrice("750m"), snap.FirstCreated()
	require.NotZero(t, priced, "the PodGroup was never priced at 3 × 250m (writes seen: %+v)", snap.Prices)
	assert.Less(t, priced, firstPod, "the PodGroup got 3 × 250m (resourceVersion %d) after the first pod was created (%d)", priced, firstPod)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg))
	cpu := (*pg.Spec.MinResources)[corev1.ResourceCPU]
	assert.Equal(t, "750m", cpu.String(), "the PodGroup's price once the pods run")

	// The deadline counts from the resume.
	failed, reason := waitTrainJobFailed(t, ns, name)
	assert.Equal(t, "DeadlineExceeded", reason)
	status, _, failedAt := framework.TrainJobCondition(failed, workload.TrainJobFailed)
	require.Equal(t, "True", status)
	require.NotNil(t, failedAt)
	// Condition times have whole seconds: allow one.
	assert.GreaterOrEqual(t, failedAt.Sub(resumed), (deadline-1)*time.Second, "Failed %s after the resume, before its %ds deadline", failedAt.Sub(resumed), deadline)
	t.Logf("created %s, resumed after %s, Failed %s after the resume", created.Format(time.RFC3339), resumed.Sub(created).Round(time.Second), failedAt.Sub(resumed).Round(time.Second))
	framework.Eventually(t, wait, "the JobSet and its pods gone", func(ctx context.Context) (bool, error) {
		pods, err := jobSetPods(ctx, ns, name)
		if err != nil || len(pods) > 0 {
			return false, err
		}
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(tj), &jobsetv1alpha2.JobSet{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
