package podgroupneighbours

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// plainRuntime is a ClusterTrainingRuntime of one node whose container asks for little, without a
// podGroupPolicy; it is deleted at the end of the test.
func plainRuntime(t *testing.T, name string) {
	t.Helper()
	rt := trainerObject("ClusterTrainingRuntime", "", name, map[string]any{
		"mlPolicy": map[string]any{"numNodes": int64(1)},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "node", "image": "busybox",
						"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}},
				}}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(context.Background(), rt))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rt) })
}

// startLifecycle runs hyperbatch's lifecycle controller in a manager that sees namespace ns.
func startLifecycle(t *testing.T, ns string) func() {
	t.Helper()
	return framework.StartTestManager(t, env.Config, ns, nil, func(mgr manager.Manager) error {
		return lifecycle.NewReconciler(mgr).SetupWithManager(mgr)
	})
}

func newTrainJob(ns, name, runtime string, ann map[string]string, deadline int64) *unstructured.Unstructured {
	spec := map[string]any{"runtimeRef": map[string]any{"name": runtime}}
	if deadline > 0 {
		spec["activeDeadlineSeconds"] = deadline
	}
	tj := trainerObject("TrainJob", ns, name, spec)
	if ann != nil {
		tj.SetAnnotations(ann)
	}
	return tj
}

func getTrainJob(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	tj := defaults.NewTrainJob()
	return tj, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj)
}

// waitTrainJobFailed waits until Trainer marks the TrainJob Failed and returns it with its reason.
func waitTrainJobFailed(t *testing.T, ns, name string) (*unstructured.Unstructured, string) {
	t.Helper()
	var tj *unstructured.Unstructured
	framework.Eventually(t, wait, "TrainJob "+name+" Failed", func(ctx context.Context) (bool, error) {
		var err error
		if tj, err = getTrainJob(ctx, ns, name); err != nil {
			return false, err
		}
		return workload.TrainJobFinishedAt(tj) != nil, nil
	})
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == workload.TrainJobFailed && m["status"] == "True" {
			return tj, fmt.Sprint(m["reason"])
		}
	}
	return tj, ""
}

func waitTrainJobGone(t *testing.T, ns, name string, uid types.UID) {
	t.Helper()
	framework.Eventually(t, wait, "TrainJob "+name+" deleted", func(ctx context.Context) (bool, error) {
		tj, err := getTrainJob(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return tj.GetUID() != uid, client.IgnoreNotFound(err)
	})
}

func ttlEvents(ctx context.Context, ns string, uid types.UID) (int32, error) {
	var list corev1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	var n int32
	for _, e := range list.Items {
		if e.InvolvedObject.UID == uid && e.Reason == lifecycle.ReasonTTLExpired {
			n += max(e.Count, 1)
		}
	}
	return n, nil
}

func lifecycleActions(kind, action string) float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "hyperbatch_lifecycle_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The policy's deadline goes into the TrainJob's spec.activeDeadlineSeconds and Trainer v2.3.0 fails
// it with DeadlineExceeded; the policy's TTL (the annotation) makes hyperbatch's lifecycle controller
// delete the finished TrainJob, across a manager restart, once, with a TTLExpired Event and the
// metric. The JobSet Trainer makes for a TrainJob gets neither the policy's TTL nor its deadline.
func TestTrainJobDeadlineAndTTL(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := governedNamespaceWith(t, 4, 1)
	rt := "hb-life-" + ns
	plainRuntime(t, rt)
	stop := startLifecycle(t, ns)
	before := lifecycleActions(lifecycle.KindTrainJob, lifecycle.ActionTTLDelete)

	// A long-running TrainJob whose own deadline and TTL are explicit: its JobSet lives on.
	require.NoError(t, env.Client.Create(ctx, newTrainJob(ns, "keeper", rt, map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "3600"}, 3600)))
	js := &jobsetv1alpha2.JobSet{}
	framework.Eventually(t, wait, "the keeper's JobSet", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeper"}, js)
		return err == nil, client.IgnoreNotFound(err)
	})
	assert.Nil(t, js.Spec.TTLSecondsAfterFinished, "a TrainJob's JobSet gets no TTL from the policy")
	assert.NotContains(t, js.Annotations, hbv1.ActiveDeadlineSecondsAnnotation, "a TrainJob's JobSet gets no deadline from the policy")
	assert.Equal(t, "tq", js.Annotations[defaults.QueueNameAnnotation], "but it gets the queue")

	require.NoError(t, env.Client.Create(ctx, newTrainJob(ns, "short", rt, nil, 0)))
	created, err := getTrainJob(ctx, ns, "short")
	require.NoError(t, err)
	assert.Equal(t, int64(1), defaults.TrainJobActiveDeadlineSeconds(created), "the policy's deadline in the native field")
	assert.Equal(t, "4", created.GetAnnotations()[hbv1.TTLSecondsAfterFinishedAnnotation])

	failed, reason := waitTrainJobFailed(t, ns, "short")
	assert.Equal(t, "DeadlineExceeded", reason, "Trainer enforces the native deadline")
	// Restart between the finish and the TTL deletion: the new manager deletes it from the object's state.
	stop()
	startLifecycle(t, ns)
	waitTrainJobGone(t, ns, "short", failed.GetUID())
	fin := workload.TrainJobFinishedAt(failed)
	require.NotNil(t, fin)
	assert.GreaterOrEqual(t, time.Since(*fin), 4*time.Second-time.Second, "deleted no earlier than its TTL")
	framework.Eventually(t, wait, "one TTLExpired Event", func(ctx context.Context) (bool, error) {
		n, err := ttlEvents(ctx, ns, failed.GetUID())
		return n >= 1, err
	})
	n, err := ttlEvents(ctx, ns, failed.GetUID())
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.Equal(t, before+1, lifecycleActions(lifecycle.KindTrainJob, lifecycle.ActionTTLDelete))

	keeper, err := getTrainJob(ctx, ns, "keeper")
	require.NoError(t, err, "the running TrainJob is untouched")
	assert.Nil(t, workload.TrainJobFinishedAt(keeper))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keeper"}, js), "its JobSet is still there")
}

// A TrainJob recreated under the name of one that finished and was deleted by hand before its TTL
// expired is another object: the old one's timer does not delete it. The positive signal is a
// sentinel, finished at the same time with the same TTL, that the controller deletes.
func TestTrainJobNameReuseIsNotHitByAStaleTimer(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	ns := governedNamespaceWith(t, 5, 1)
	rt := "hb-reuse-" + ns
	plainRuntime(t, rt)
	startLifecycle(t, ns)

	// 15 s, not the policy's 5: the test deletes "reuse" by hand after both have failed, and must get
	// there before the controller does, however slowly Trainer fails the second one.
	ttl := map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "15"}
	require.NoError(t, env.Client.Create(ctx, newTrainJob(ns, "reuse", rt, ttl, 0)))
	require.NoError(t, env.Client.Create(ctx, newTrainJob(ns, "sentinel", rt, ttl, 0)))
	old, _ := waitTrainJobFailed(t, ns, "reuse")
	sentinel, _ := waitTrainJobFailed(t, ns, "sentinel")
	require.NoError(t, env.Client.Delete(ctx, old))
	waitTrainJobGone(t, ns, "reuse", old.GetUID())
	require.NoError(t, env.Client.Create(ctx, newTrainJob(ns, "reuse", rt, nil, 3600)))
	again, err := getTrainJob(ctx, ns, "reuse")
	require.NoError(t, err)
	require.NotEqual(t, old.GetUID(), again.GetUID())

	waitTrainJobGone(t, ns, "sentinel", sentinel.GetUID())
	cur, err := getTrainJob(ctx, ns, "reuse")
	require.NoError(t, err, "the recreated TrainJob was deleted on its predecessor's schedule")
	assert.Equal(t, again.GetUID(), cur.GetUID())
	assert.Nil(t, cur.GetDeletionTimestamp())
}
