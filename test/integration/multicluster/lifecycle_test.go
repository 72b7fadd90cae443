package multicluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// TestLifecycleOnControlPlane: hyperbatch's lifecycle controller runs against the Karmada apiserver
// next to the HyperJob controller. A HyperJob with hyperbatch.dev/active-deadline-seconds 10 and
// hyperbatch.dev/ttl-seconds-after-finished 5 whose children kwok keeps Running in member1 gets
// Failed (DeadlineExceeded) on the plane once the deadline passes, is deleted by its TTL 5 s later,
// and its children are gone from member1 within 60 s of that.
//
// What it does not show, because it does not happen: the deadline alone does not stop the children
// in the member. The lifecycle controller aborts children through Volcano's Command API on the
// cluster it runs in; on the plane no Volcano controller reads the Commands and Karmada does not
// propagate them (docs/multicluster.md, "Lifecycle").
func TestLifecycleOnControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "lifecycle", "hl"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns, func(m ctrl.Manager) error { return lifecycle.NewReconciler(m).SetupWithManager(m) })

	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(leafReplicatedJob("a", 1, 1, 1, kwokHold, "member1")).Obj()
	hj.Annotations = map[string]string{"hyperbatch.dev/active-deadline-seconds": "10", "hyperbatch.dev/ttl-seconds-after-finished": "5"}
	require.NoError(t, plane.Client.Create(ctx, hj))
	waitFor(ctx, t, "child hl-a-0 Running in member1", func(ctx context.Context) (bool, string) {
		var j batchv1alpha1.Job
		if err := members["member1"].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hl-a-0"}, &j); err != nil {
			return false, err.Error()
		}
		return j.Status.State.Phase == batchv1alpha1.Running, describe(j.Status.State)
	})

	failed := hyperJobCondition(ctx, t, hj, hyperjob.ConditionFailed, metav1.ConditionTrue)
	assert.Equal(t, lifecycle.ReasonDeadlineExceeded, failed.Reason, "the deadline failed the HyperJob on the plane: %s", failed.Message)
	failedAt := time.Now()
	waitFor(ctx, t, "the HyperJob deleted by its TTL", func(ctx context.Context) (bool, string) {
		err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &trainingv1alpha1.HyperJob{})
		return apierrors.IsNotFound(err), errString(err)
	})
	t.Logf("HyperJob Failed (%s), deleted by its TTL %s later", failed.Reason, time.Since(failedAt).Round(100*time.Millisecond))
	gone := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, 60*time.Second)
	defer gcancel()
	waitFor(gctx, t, "child hl-a-0 gone from member1 within 60 s", func(ctx context.Context) (bool, string) {
		err := members["member1"].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hl-a-0"}, &batchv1alpha1.Job{})
		return apierrors.IsNotFound(err), errString(err)
	})
	t.Logf("child gone from member1 %s after the HyperJob's deletion", time.Since(gone).Round(100*time.Millisecond))
}
