package multicluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// TestLifecycleOnControlPlane: hyperbatch's lifecycle controller runs against the Karmada apiserver
// next to the HyperJob controller. A HyperJob with hyperbatch.dev/active-deadline-seconds 10 whose
// two children kwok keeps Running in member1 and member2 gets Failed (DeadlineExceeded) on the plane
// once the deadline passes, and its children stop where they run: the decision goes with each
// child's template to its member, whose hyperbatch lifecycle controller (member mode) aborts the
// child through Volcano's AbortJob command; the member's child is Aborted with no pod left and an
// Event saying why, and Karmada reflects Aborted onto the plane's child. Then
// hyperbatch.dev/ttl-seconds-after-finished deletes the HyperJob and its children leave the members.
func TestLifecycleOnControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "lifecycle", "hl"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns, func(m ctrl.Manager) error { return lifecycle.NewReconciler(m).OnKarmadaPlane().SetupWithManager(m) })

	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(
		leafReplicatedJob("a", 1, 2, 1, kwokHold, "member1"),
		leafReplicatedJob("b", 1, 2, 1, kwokHold, "member2"),
	).Obj()
	hj.Annotations = map[string]string{"hyperbatch.dev/active-deadline-seconds": "10"}
	require.NoError(t, plane.Client.Create(ctx, hj))
	children := map[string]string{"hl-a-0": "member1", "hl-b-0": "member2"}
	memberJob := func(ctx context.Context, child string) (*batchv1alpha1.Job, error) {
		var j batchv1alpha1.Job
		return &j, members[children[child]].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j)
	}
	pods := func(ctx context.Context, child string) ([]string, error) {
		var l corev1.PodList
		if err := members[children[child]].Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: child}); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Name+"/"+string(p.Status.Phase))
		}
		return out, nil
	}
	for child := range children {
		waitFor(ctx, t, "child "+child+" Running with 2 pods in "+children[child], func(ctx context.Context) (bool, string) {
			j, err := memberJob(ctx, child)
			if err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == batchv1alpha1.Running && j.Status.Running == 2, describe(j.Status)
		})
	}

	failed := hyperJobCondition(ctx, t, hj, hyperjob.ConditionFailed, metav1.ConditionTrue)
	assert.Equal(t, lifecycle.ReasonDeadlineExceeded, failed.Reason, "the deadline failed the HyperJob on the plane: %s", failed.Message)
	failedAt := time.Now()

	// The children stop in their members: Aborted, every pod gone, an Event on the member's child
	// naming the decision; the plane's child shows Aborted (Karmada's reflection).
	for child, m := range children {
		waitFor(ctx, t, "child "+child+" Aborted in "+m+" with no pod left", func(ctx context.Context) (bool, string) {
			j, err := memberJob(ctx, child)
			if err != nil {
				return false, err.Error()
			}
			left, err := pods(ctx, child)
			if err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == batchv1alpha1.Aborted && len(left) == 0, fmt.Sprintf("%s, pods %v", describe(j.Status.State), left)
		})
		j, err := memberJob(ctx, child)
		require.NoError(t, err)
		assert.Equal(t, lifecycle.ReasonDeadlineExceeded, j.Annotations[lifecycle.TerminationReasonAnnotation], "the decision reached %s's copy", m)
		var evs corev1.EventList
		require.NoError(t, members[m].Client.List(ctx, &evs, client.InNamespace(ns)))
		var why []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == child && e.Reason == lifecycle.ReasonDeadlineExceeded {
				why = append(why, e.Message)
			}
		}
		require.NotEmpty(t, why, "a DeadlineExceeded Event on %s in %s", child, m)
		t.Logf("%s in %s: %s", child, m, why[0])
		waitFor(ctx, t, "the plane's child "+child+" reflects Aborted", func(ctx context.Context) (bool, string) {
			var pj batchv1alpha1.Job
			if err := plane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &pj); err != nil {
				return false, err.Error()
			}
			return pj.Status.State.Phase == batchv1alpha1.Aborted, describe(pj.Status.State)
		})
	}
	t.Logf("HyperJob Failed (%s); both children Aborted in their members, no pod left, %s later", failed.Reason, time.Since(failedAt).Round(100*time.Millisecond))
	evs, err := hyperJobEvents(ctx, ns, name, lifecycle.ReasonAbortedChildren)
	require.NoError(t, err)
	require.NotEmpty(t, evs, "an %s Event on the HyperJob", lifecycle.ReasonAbortedChildren)
	assert.Contains(t, evs[0].Message, "member cluster")

	// The TTL, added now, deletes the failed HyperJob, and its children leave the members.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur trainingv1alpha1.HyperJob
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
			return err
		}
		cur.Annotations["hyperbatch.dev/ttl-seconds-after-finished"] = "1"
		return plane.Client.Update(ctx, &cur)
	}))
	waitFor(ctx, t, "the HyperJob deleted by its TTL", func(ctx context.Context) (bool, string) {
		err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &trainingv1alpha1.HyperJob{})
		return apierrors.IsNotFound(err), errString(err)
	})
	gone := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, childCleanupLimit)
	defer gcancel()
	for child, m := range children {
		waitFor(gctx, t, "child "+child+" gone from "+m, func(ctx context.Context) (bool, string) {
			_, err := memberJob(ctx, child)
			return apierrors.IsNotFound(err), errString(err)
		})
	}
	t.Logf("children gone from the members %s after the HyperJob's deletion", time.Since(gone).Round(100*time.Millisecond))
}
