package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
)

const jobSetNameLabel = jobsetv1alpha2.JobSetNameKey

func jobSetPodsAndJobs(ctx context.Context, ns, js string) (pods, jobs int, err error) {
	var pl corev1.PodList
	if err := env.Client.List(ctx, &pl, client.InNamespace(ns), client.MatchingLabels{jobSetNameLabel: js}); err != nil {
		return 0, 0, err
	}
	var jl batchv1.JobList
	if err := env.Client.List(ctx, &jl, client.InNamespace(ns), client.MatchingLabels{jobSetNameLabel: js}); err != nil {
		return 0, 0, err
	}
	return len(pl.Items), len(jl.Items), nil
}

// With the real JobSet controller (v0.11.0) and Job controller: a running JobSet past its deadline
// ends Failed with reason DeadlineExceeded, on time; the JobSet controller then deletes its Jobs and
// their pods go; the PodGroup it controls is deleted.
func TestJobSetDeadlineWithRealJobSetController(t *testing.T) {
	ns := newNamespace(t, "js-deadline")
	startManager(t, ns, managerOptions{jobSet: true})
	js := newJobSet(ns, "train", 2, 4, false, nil)
	create(t, js)
	waitFor(t, 30*time.Second, "2 Jobs with 2 pods", func(ctx context.Context) (bool, error) {
		p, j, err := jobSetPodsAndJobs(ctx, ns, "train")
		return p == 2 && j == 2, err
	})
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train-pg", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))}},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 2}}
	create(t, pg)

	got, failed := waitForJobSetFailed(t, ns, "train")
	requireWithin(t, "Failed", got.CreationTimestamp.Time, failed.LastTransitionTime.Time, 4*time.Second)
	assert.Equal(t, string(jobsetv1alpha2.JobSetFailed), got.Status.TerminalState)

	waitFor(t, 30*time.Second, "Jobs and pods gone, PodGroup deleted", func(ctx context.Context) (bool, error) {
		p, j, err := jobSetPodsAndJobs(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		pgErr := get(ctx, &schedulingv1beta1.PodGroup{}, ns, "train-pg")
		if p != 0 || j != 0 || !apierrors.IsNotFound(pgErr) {
			return false, fmt.Errorf("%d pods, %d jobs, PodGroup: %w", p, j, pgErr)
		}
		return true, nil
	})
	var cur jobsetv1alpha2.JobSet
	require.NoError(t, get(context.Background(), &cur, ns, "train"))
	assert.Equal(t, lifecycle.ReasonDeadlineExceeded, cur.Annotations[lifecycle.TerminationReasonAnnotation])
	c := trueCondition(cur.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
	require.NotNil(t, c, "the JobSet controller kept the Failed condition")
	assert.Equal(t, lifecycle.ReasonDeadlineExceeded, c.Reason)
	waitEvent(t, ns, cur.UID, lifecycle.ReasonDeadlineExceeded)
}

// Time spent suspended does not count, and resuming restarts the clock (the Kubernetes Job rule).
// A control JobSet with the same deadline, created running at the same time, is the positive signal
// that the deadline has passed and the controller acted.
func TestJobSetSuspendedTimeDoesNotCount(t *testing.T) {
	ns := newNamespace(t, "js-suspend")
	startManager(t, ns, managerOptions{jobSet: true})
	create(t, newJobSet(ns, "paused", 1, 3, true, nil))
	create(t, newJobSet(ns, "control", 1, 3, false, nil))
	waitFor(t, 20*time.Second, "paused JobSet Suspended", func(ctx context.Context) (bool, error) {
		var js jobsetv1alpha2.JobSet
		if err := get(ctx, &js, ns, "paused"); err != nil {
			return false, err
		}
		return trueCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetSuspended)) != nil, nil
	})
	waitForJobSetFailed(t, ns, "control")
	var paused jobsetv1alpha2.JobSet
	require.NoError(t, get(context.Background(), &paused, ns, "paused"))
	require.Nil(t, trueCondition(paused.Status.Conditions, string(jobsetv1alpha2.JobSetFailed)), "a suspended JobSet's deadline ran")

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(context.Background(), &paused, ns, "paused"); err != nil {
			return err
		}
		paused.Spec.Suspend = ptr.To(false)
		return env.Client.Update(context.Background(), &paused)
	}))
	var resumedAt time.Time
	waitFor(t, 20*time.Second, "the JobSet controller resumes it", func(ctx context.Context) (bool, error) {
		var js jobsetv1alpha2.JobSet
		if err := get(ctx, &js, ns, "paused"); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetSuspended))
		if c == nil || c.Status != metav1.ConditionFalse {
			return false, nil
		}
		resumedAt = c.LastTransitionTime.Time
		return true, nil
	})
	got, failed := waitForJobSetFailed(t, ns, "paused")
	requireWithin(t, "Failed after resume", resumedAt, failed.LastTransitionTime.Time, 3*time.Second)
	require.Greater(t, failed.LastTransitionTime.Sub(got.CreationTimestamp.Time), 4*time.Second,
		"the clock must have started at the resume, not at creation")
}

// The JobSet's own TTL (spec.ttlSecondsAfterFinished) is enforced by the JobSet controller; the
// lifecycle controller counts that deletion and deletes nothing itself.
func TestJobSetNativeTTLCounted(t *testing.T) {
	ns := newNamespace(t, "js-ttl")
	startManager(t, ns, managerOptions{jobSet: true})
	before := actions(lifecycle.KindJobSet, lifecycle.ActionNativeTTLDelete)
	create(t, newJobSet(ns, "short", 1, 1, false, ptr.To[int32](1)))
	waitForJobSetFailed(t, ns, "short")
	waitFor(t, 30*time.Second, "JobSet deleted by its own TTL and counted", func(ctx context.Context) (bool, error) {
		gone := apierrors.IsNotFound(get(ctx, &jobsetv1alpha2.JobSet{}, ns, "short"))
		return gone && actions(lifecycle.KindJobSet, lifecycle.ActionNativeTTLDelete) == before+1, nil
	})
}
