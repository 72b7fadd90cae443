package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
)

// commandsFor lists the AbortJob Commands targeting each job (by job UID).
func commandsFor(ctx context.Context, ns string) (map[string][]busv1alpha1.Command, error) {
	var l busv1alpha1.CommandList
	if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string][]busv1alpha1.Command{}
	for _, c := range l.Items {
		if c.TargetObject != nil {
			out[string(c.TargetObject.UID)] = append(out[string(c.TargetObject.UID)], c)
		}
	}
	return out, nil
}

// requireAborted checks the abort of each job: the decision annotations, and exactly one AbortJob
// Command targeting it, shaped as Volcano's vcctl makes it.
func requireAborted(t *testing.T, ns string, jobs []batchv1alpha1.Job) {
	t.Helper()
	waitFor(t, 20*time.Second, "an AbortJob command per job", func(ctx context.Context) (bool, error) {
		cmds, err := commandsFor(ctx, ns)
		if err != nil {
			return false, err
		}
		for _, j := range jobs {
			var live batchv1alpha1.Job
			if err := get(ctx, &live, ns, j.Name); err != nil {
				return false, err
			}
			if live.Annotations[lifecycle.AbortCommandAnnotation] == "" || len(cmds[string(j.UID)]) == 0 {
				return false, fmt.Errorf("job %s not aborted yet", j.Name)
			}
		}
		return true, nil
	})
	cmds, err := commandsFor(context.Background(), ns)
	require.NoError(t, err)
	for _, j := range jobs {
		var live batchv1alpha1.Job
		require.NoError(t, get(context.Background(), &live, ns, j.Name))
		assert.Equal(t, lifecycle.ReasonDeadlineExceeded, live.Annotations[lifecycle.TerminationReasonAnnotation])
		assert.NotEmpty(t, live.Annotations[lifecycle.DeadlineExceededAtAnnotation])
		require.Len(t, cmds[string(j.UID)], 1, "job %s: exactly one AbortJob command", j.Name)
		c := cmds[string(j.UID)][0]
		assert.Equal(t, string(busv1alpha1.AbortJobAction), c.Action)
		assert.Equal(t, live.Annotations[lifecycle.AbortCommandAnnotation], c.Name)
		assert.Equal(t, "Job", c.TargetObject.Kind)
		assert.Equal(t, batchv1alpha1.SchemeGroupVersion.String(), c.TargetObject.APIVersion)
		assert.Equal(t, j.Name, c.TargetObject.Name)
		require.Len(t, c.OwnerReferences, 1)
		assert.Equal(t, j.UID, c.OwnerReferences[0].UID)
		assert.Equal(t, lifecycle.ReasonDeadlineExceeded, c.Reason)
	}
}

// A HyperJob past its deadline gets Failed/DeadlineExceeded on time, every child is aborted through
// an AbortJob command exactly once, and a child deleted afterwards is not recreated.
func TestHyperJobDeadline(t *testing.T) {
	ns := newNamespace(t, "hj-deadline")
	startManager(t, ns, managerOptions{hyperJob: true})
	before := actions(lifecycle.KindHyperJob, lifecycle.ActionDeadline)
	hj := newHyperJob(ns, "train", 2, 3, -1)
	create(t, hj)
	jobs := waitForChildren(t, ns, "train", 2)

	got, failed := waitForHyperJobFailed(t, ns, "train")
	requireWithin(t, "Failed", got.CreationTimestamp.Time, failed.LastTransitionTime.Time, 3*time.Second)
	requireAborted(t, ns, jobs)
	assert.Equal(t, before+1, actions(lifecycle.KindHyperJob, lifecycle.ActionDeadline))
	waitEvent(t, ns, got.UID, lifecycle.ReasonDeadlineExceeded)

	// A child of the failed HyperJob that disappears is never recreated: delete one, then make the
	// HyperJob controller process the HyperJob again (a spec change; it answers with
	// status.observedGeneration) and check.
	require.NoError(t, env.Client.Delete(context.Background(), &jobs[0]))
	waitFor(t, 20*time.Second, "child deleted", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx, &batchv1alpha1.Job{}, ns, jobs[0].Name)), nil
	})
	updateHyperJob(t, ns, "train", func(hj *trainingv1alpha1.HyperJob) {
		hj.Spec.Plugins = map[string][]string{"svc": nil}
	})
	waitFor(t, 20*time.Second, "observedGeneration", func(ctx context.Context) (bool, error) {
		var cur trainingv1alpha1.HyperJob
		if err := get(ctx, &cur, ns, "train"); err != nil {
			return false, err
		}
		return cur.Status.ObservedGeneration == cur.Generation, nil
	})
	left, err := childJobs(context.Background(), ns, "train")
	require.NoError(t, err)
	require.Len(t, left, 1, "the deleted child of a terminal HyperJob was recreated")
}

// A HyperJob whose deadline failed it is deleted (foreground) ttl seconds after its Failed
// condition's lastTransitionTime; its children go with it and are not recreated.
func TestHyperJobTTLDeletesItAndChildren(t *testing.T) {
	ns := newNamespace(t, "hj-ttl")
	startManager(t, ns, managerOptions{hyperJob: true})
	// The deadline is set once the children exist: a 1 s deadline counted from creationTimestamp
	// (whole seconds) can be due at creation, before the HyperJob controller made any child, and a
	// HyperJob failed first never gets children. This test is about what follows the failure.
	create(t, newHyperJob(ns, "done", 2, -1, -1))
	waitForChildren(t, ns, "done", 2)
	updateHyperJob(t, ns, "done", func(hj *trainingv1alpha1.HyperJob) { hj.Annotations = lifecycleAnnotations(1, 3) })
	got, failed := waitForHyperJobFailed(t, ns, "done")

	waitFor(t, 30*time.Second, "HyperJob deleted", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx, &trainingv1alpha1.HyperJob{}, ns, "done")), nil
	})
	// Foreground: the HyperJob is gone only after its children.
	left, err := childJobs(context.Background(), ns, "done")
	require.NoError(t, err)
	require.Empty(t, left)
	es := waitEvent(t, ns, got.UID, lifecycle.ReasonTTLExpired)
	requireWithin(t, "TTL deletion", failed.LastTransitionTime.Time, es[0].FirstTimestamp.Time, 3*time.Second)

	// The HyperJob controller has processed later events (a sentinel HyperJob's children exist), and
	// the deleted HyperJob's children are still gone.
	create(t, newHyperJob(ns, "sentinel", 1, 0, -1))
	waitForChildren(t, ns, "sentinel", 1)
	left, err = childJobs(context.Background(), ns, "done")
	require.NoError(t, err)
	require.Empty(t, left, "children of a TTL-deleted HyperJob were recreated")
}

// A manager stopped mid-countdown and a new one started: the deadline and the TTL deletion each
// happen once, on time, from the object's timestamps.
func TestRestartMidCountdown(t *testing.T) {
	ns := newNamespace(t, "hj-restart")
	stop := startManager(t, ns, managerOptions{hyperJob: true})
	create(t, newHyperJob(ns, "r", 2, 4, 4))
	jobs := waitForChildren(t, ns, "r", 2)
	stop()
	startManager(t, ns, managerOptions{hyperJob: true})

	got, failed := waitForHyperJobFailed(t, ns, "r")
	requireWithin(t, "Failed after a restart", got.CreationTimestamp.Time, failed.LastTransitionTime.Time, 4*time.Second)
	requireAborted(t, ns, jobs)

	// Restart again between the deadline and the TTL deletion.
	stop2 := startManager(t, ns, managerOptions{hyperJob: true})
	_ = stop2
	waitFor(t, 30*time.Second, "HyperJob deleted", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx, &trainingv1alpha1.HyperJob{}, ns, "r")), nil
	})
	waitEvent(t, ns, got.UID, lifecycle.ReasonDeadlineExceeded)  // the deadline acted once
	ttl := waitEvent(t, ns, got.UID, lifecycle.ReasonTTLExpired) // the TTL deletion happened once
	requireWithin(t, "TTL deletion after restarts", failed.LastTransitionTime.Time, ttl[0].FirstTimestamp.Time, 4*time.Second)
}

// A HyperJob recreated under the name of one the TTL deleted is a different object (another UID):
// it is not deleted on the old one's schedule.
func TestNameReusedAfterDeletion(t *testing.T) {
	ns := newNamespace(t, "hj-reuse")
	startManager(t, ns, managerOptions{hyperJob: true})
	create(t, newHyperJob(ns, "reuse", 1, 1, 1))
	old, _ := waitForHyperJobFailed(t, ns, "reuse")
	waitFor(t, 30*time.Second, "first HyperJob deleted", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx, &trainingv1alpha1.HyperJob{}, ns, "reuse")), nil
	})

	// Same name, same deadline, a long TTL; and a sentinel with the old short TTL created with it.
	create(t, newHyperJob(ns, "reuse", 1, 1, 120))
	create(t, newHyperJob(ns, "sentinel", 1, 1, 1))
	again, _ := waitForHyperJobFailed(t, ns, "reuse")
	require.NotEqual(t, old.UID, again.UID)
	waitFor(t, 30*time.Second, "sentinel deleted by its TTL", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(get(ctx, &trainingv1alpha1.HyperJob{}, ns, "sentinel")), nil
	})
	var cur trainingv1alpha1.HyperJob
	require.NoError(t, get(context.Background(), &cur, ns, "reuse"))
	require.Equal(t, again.UID, cur.UID)
	require.Nil(t, cur.DeletionTimestamp, "the recreated HyperJob is being deleted")
}
