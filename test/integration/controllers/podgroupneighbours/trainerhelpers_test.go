package podgroupneighbours

// Helpers of the TrainJob tests: Trainer's objects, the runtime most tests use, waits on a
// TrainJob's JobSet, Job and pods, the PodGroup status controller, and the gang watch
// (framework.GangWatch, shared with test/e2e).

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// trainerObject is an object of Kubeflow Trainer's API (trainer.kubeflow.org/v1alpha1), written as
// unstructured: Trainer's Go module is a pinned tool (hack/tools/trainer), not a dependency of ours.
func trainerObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("trainer.kubeflow.org/v1alpha1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// volcanoRuntime creates a ClusterTrainingRuntime with podGroupPolicy.volcano whose one
// replicatedJob's container asks for nothing (its cpu comes from the namespace's LimitRange); pod
// adds to its pod spec. Deleted when the test ends.
func volcanoRuntime(t *testing.T, name string, pod map[string]any) {
	t.Helper()
	spec := map[string]any{"containers": []any{map[string]any{"name": "node", "image": "busybox"}}}
	for k, v := range pod {
		spec[k] = v
	}
	rt := trainerObject("ClusterTrainingRuntime", "", name, map[string]any{
		"mlPolicy":       map[string]any{"numNodes": int64(1)},
		"podGroupPolicy": map[string]any{"volcano": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec":     map[string]any{"template": map[string]any{"spec": spec}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(context.Background(), rt))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
}

// priced says whether Trainer's PodGroup carries hyperbatch's price want (spec.minResources and the
// hyperbatch.dev/priced-min-resources annotation), and describes what it carries.
func priced(pg *schedulingv1beta1.PodGroup, want corev1.ResourceList) (bool, string) {
	got := "none"
	if pg.Spec.MinResources != nil {
		got = defaults.FormatResourceList(*pg.Spec.MinResources)
	}
	return defaults.SameResourceList(pg.Spec.MinResources, want) && pg.Annotations[hbv1.PricedMinResourcesAnnotation] == defaults.FormatResourceList(want),
		fmt.Sprintf("minResources %s, annotation %q", got, pg.Annotations[hbv1.PricedMinResourcesAnnotation])
}

// waitPriced waits until Trainer's PodGroup ns/name carries hyperbatch's price want.
func waitPriced(t *testing.T, ns, name string, want corev1.ResourceList, what string) {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{}
	last := ""
	framework.Eventually(t, wait, what, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ok, desc := priced(pg, want)
		if desc != last {
			t.Logf("PodGroup %s: %s", name, desc)
			last = desc
		}
		return ok, nil
	})
}

// waitJobSuspended waits until the Job controller marked the JobSet's Job Suspended: its pods are
// deleted and no new one is made.
func waitJobSuspended(t *testing.T, ns, name string) {
	t.Helper()
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
}

// waitPods waits until JobSet name has n pods and returns them.
func waitPods(t *testing.T, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(t, wait, fmt.Sprintf("the %d pods of %s", n, name), func(ctx context.Context) (bool, error) {
		var err error
		pods, err = jobSetPods(ctx, ns, name)
		return len(pods) == n, err
	})
	return pods
}

func cpuList(cpu string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
}

// startPodGroupStatus runs the PodGroup status controller (Pending → Inqueue → Running → Completed)
// in a manager of its own for the test, and returns what stops it (before the test ends if called).
func startPodGroupStatus(t *testing.T) func() {
	t.Helper()
	stop, err := framework.StartManager(env.Config, func(mgr manager.Manager) error {
		r, err := podgroupstatus.NewReconciler(mgr, podgroupstatus.Options{})
		if err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	})
	require.NoError(t, err)
	var once sync.Once
	stopOnce := func() { once.Do(func() { assert.NoError(t, stop()) }) }
	t.Cleanup(stopOnce)
	return stopOnce
}

// watchGang starts a framework.GangWatch of the gang name in ns (its PodGroup's phases and
// prices, its pods' creation and binding), on a watch client of its own.
func watchGang(t *testing.T, ns, name string) *framework.GangWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return framework.WatchGang(t, wc, ns, name)
}
