package podgroupneighbours

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/internal/workload"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// priceLog records, from watches on the namespace opened before the resume, each write of the
// PodGroup (its resourceVersion and minResources cpu) and each pod's creation (the resourceVersion of
// its first event). resourceVersions are etcd revisions, one counter for every resource, so they order
// a PodGroup write against a pod's creation.
type priceLog struct {
	mu     sync.Mutex
	prices []priceWrite
	pods   map[string]uint64
}

type priceWrite struct {
	rv  uint64
	cpu string
}

func watchPrices(t *testing.T, ns, pgName string) *priceLog {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &priceLog{pods: map[string]uint64{}}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &schedulingv1beta1.PodGroupList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				obj, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
				if err != nil {
					continue
				}
				l.mu.Lock()
				switch o := obj.(type) {
				case *corev1.Pod:
					if _, seen := l.pods[o.Name]; !seen {
						l.pods[o.Name] = rv
					}
				case *schedulingv1beta1.PodGroup:
					if o.Name == pgName && o.Spec.MinResources != nil {
						cpu := (*o.Spec.MinResources)[corev1.ResourceCPU]
						l.prices = append(l.prices, priceWrite{rv: rv, cpu: cpu.String()})
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// pricedBefore is the resourceVersion of the first PodGroup write with minResources cpu want, and
// the lowest resourceVersion of a pod's creation (0 when none).
func (l *priceLog) pricedBefore(want string) (priced, firstPod uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := resource.MustParse(want)
	for _, p := range l.prices {
		if priced == 0 && w.Cmp(resource.MustParse(p.cpu)) == 0 {
			priced = p.rv
		}
	}
	for _, rv := range l.pods {
		if firstPod == 0 || rv < firstPod {
			firstPod = rv
		}
	}
	return priced, firstPod
}

// trainJobConditionTime is the lastTransitionTime of the TrainJob's condition typ with status
// (nil when it has none).
func trainJobConditionTime(tj *unstructured.Unstructured, typ, status string) *time.Time {
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ || m["status"] != status {
			continue
		}
		s, _ := m["lastTransitionTime"].(string)
		if ts, err := time.Parse(time.RFC3339, s); err == nil {
			return &ts
		}
	}
	return nil
}

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
	runtime := trainerObject("ClusterTrainingRuntime", "", rt, map[string]any{
		"mlPolicy":       map[string]any{"numNodes": int64(1)},
		"podGroupPolicy": map[string]any{"volcano": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					// No requests: the pods' cpu comes from the namespace's LimitRange.
					"containers": []any{map[string]any{"name": "node", "image": "busybox"}},
				}}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(ctx, runtime))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), runtime) })

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
	framework.Eventually(t, wait, "the JobSet's Job marked Suspended by the Job controller", func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil || len(jobs.Items) != 1 {
			return false, err
		}
		for _, c := range jobs.Items[0].Status.Conditions {
			if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
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
	rec := watchPrices(t, ns, name)
	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("250m") }))
	framework.Eventually(t, wait, "the suspended TrainJob's PodGroup re-priced at 3 × 250m", func(context.Context) (bool, error) {
		priced, _ := rec.pricedBefore("750m")
		return priced != 0, nil
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
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.pods) == 3, nil
	})
	priced, firstPod := rec.pricedBefore("750m")
	require.NotZero(t, priced, "the PodGroup was never priced at 3 × 250m (writes seen: %+v)", rec.prices)
	assert.Less(t, priced, firstPod, "the PodGroup got 3 × 250m (resourceVersion %d) after the first pod was created (%d)", priced, firstPod)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg))
	cpu := (*pg.Spec.MinResources)[corev1.ResourceCPU]
	assert.Equal(t, "750m", cpu.String(), "the PodGroup's price once the pods run")

	// The deadline counts from the resume.
	failed, reason := waitTrainJobFailed(t, ns, name)
	assert.Equal(t, "DeadlineExceeded", reason)
	failedAt := trainJobConditionTime(failed, workload.TrainJobFailed, "True")
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
