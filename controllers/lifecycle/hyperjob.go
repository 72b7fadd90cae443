package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// reconcileHyperJob enforces a HyperJob's deadline (Failed/DeadlineExceeded, then every child
// Volcano Job aborted) and its TTL (foreground deletion).
//
// The HyperJob controller never writes the children of a finished HyperJob (it checks the terminal
// condition on a view it has confirmed current), so once the Failed condition is written no child is
// created or recreated, and a TTL deletion is never undone.
func (r *Reconciler) reconcileHyperJob(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var hj trainingv1alpha1.HyperJob
	if err := r.client.Get(ctx, req.NamespacedName, &hj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if hj.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	var res result
	now := r.now()

	if deadline, has, err := ActiveDeadline(&hj); err != nil {
		r.recorder.Event(&hj, corev1.EventTypeWarning, ReasonInvalidLifecycleAnnotation, err.Error())
	} else if has {
		if start := workload.HyperJobStart(&hj); start != nil {
			due := start.Add(deadline)
			if now.Before(due) {
				res.at(now, due)
			} else {
				done, err := r.failHyperJob(ctx, &hj, deadline, now, due)
				if err != nil {
					reconcileErrors.WithLabelValues(KindHyperJob).Inc()
					return ctrl.Result{}, err
				}
				if !done {
					return ctrl.Result{RequeueAfter: conflictRequeue}, nil
				}
			}
		}
	}

	if failedForDeadline(&hj) {
		wait, err := r.abortChildren(ctx, &hj)
		if err != nil {
			reconcileErrors.WithLabelValues(KindHyperJob).Inc()
			return ctrl.Result{}, err
		}
		if wait {
			res.wait(conflictRequeue)
		}
	}

	if ttl, has, err := TTLAfterFinished(&hj); err != nil {
		r.recorder.Event(&hj, corev1.EventTypeWarning, ReasonInvalidLifecycleAnnotation, err.Error())
	} else if has {
		if fin := workload.HyperJobFinishedAt(&hj); fin != nil {
			due := fin.Add(ttl)
			if now.Before(due) {
				res.at(now, due)
			} else if err := r.deleteHyperJob(ctx, &hj, ttl, due); errors.Is(err, errRetry) {
				res.wait(conflictRequeue)
			} else if err != nil {
				reconcileErrors.WithLabelValues(KindHyperJob).Inc()
				return ctrl.Result{}, err
			}
		}
	}
	return res.ctrl(), nil
}

func failedForDeadline(hj *trainingv1alpha1.HyperJob) bool {
	c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjobstatus.ConditionFailed)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonDeadlineExceeded
}

// failHyperJob writes the Failed condition with reason DeadlineExceeded, guarded by resourceVersion:
// a HyperJob the cache shows running but that has just completed is never failed. done is false when
// the lock refused the write (the cache was behind; the next pass decides again).
func (r *Reconciler) failHyperJob(ctx context.Context, hj *trainingv1alpha1.HyperJob, deadline time.Duration, now, due time.Time) (bool, error) {
	orig := hj.DeepCopy()
	msg := fmt.Sprintf("the HyperJob ran longer than its active deadline of %s (%s), counted from its creation at %s",
		deadline, activeDeadlineKey, hj.CreationTimestamp.UTC().Format(time.RFC3339))
	apimeta.SetStatusCondition(&hj.Status.Conditions, metav1.Condition{
		Type: hyperjobstatus.ConditionFailed, Status: metav1.ConditionTrue, Reason: ReasonDeadlineExceeded, Message: msg,
		ObservedGeneration: hj.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	if err := r.client.Status().Patch(ctx, hj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		*hj = *orig
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info("deadline not written yet: the cached HyperJob is outdated", "reason", err.Error())
			return false, nil
		}
		return false, fmt.Errorf("writing the DeadlineExceeded condition of HyperJob %s/%s: %w", hj.Namespace, hj.Name, err)
	}
	observe(KindHyperJob, ActionDeadline, now, due)
	r.recorder.Event(hj, corev1.EventTypeWarning, ReasonDeadlineExceeded, msg+"; aborting its child Volcano Jobs")
	log.FromContext(ctx).Info("HyperJob deadline exceeded", "deadline", deadline, "lag", now.Sub(due))
	return true, nil
}

// abortChildren aborts every child Volcano Job of a HyperJob that failed for its deadline and still
// runs. wait reports a child whose abort must be looked at again soon (a lock conflict).
func (r *Reconciler) abortChildren(ctx context.Context, hj *trainingv1alpha1.HyperJob) (wait bool, err error) {
	var jobs batchv1alpha1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(hj.Namespace), client.MatchingFields{childIndex: string(hj.UID)}); err != nil {
		return false, fmt.Errorf("listing the child Volcano Jobs of HyperJob %s/%s: %w", hj.Namespace, hj.Name, err)
	}
	c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjobstatus.ConditionFailed)
	due := c.LastTransitionTime.Time
	var errs []error
	aborted := 0
	for i := range jobs.Items {
		j := &jobs.Items[i]
		st, err := r.abortVCJob(ctx, j, KindHyperJob, ActionAbortChild, due,
			fmt.Sprintf("HyperJob %s exceeded its active deadline", hj.Name))
		switch {
		case err != nil:
			errs = append(errs, err)
		case st == abortConflict:
			wait = true
		case st == abortDecided:
			aborted++
		}
	}
	switch {
	case aborted > 0 && r.onPlane:
		r.recorder.Eventf(hj, corev1.EventTypeNormal, ReasonAbortedChildren,
			"aborting %d child Volcano Jobs (DeadlineExceeded): the decision goes with each child to its member cluster, whose hyperbatch lifecycle controller aborts it there through Volcano's AbortJob command", aborted)
	case aborted > 0:
		r.recorder.Eventf(hj, corev1.EventTypeNormal, ReasonAbortedChildren, "aborting %d child Volcano Jobs (DeadlineExceeded) through Volcano's AbortJob command", aborted)
	}
	return wait, errors.Join(errs...)
}

// deleteHyperJob deletes a finished HyperJob whose TTL expired (deleteAfterTTL).
func (r *Reconciler) deleteHyperJob(ctx context.Context, hj *trainingv1alpha1.HyperJob, ttl time.Duration, due time.Time) error {
	return r.deleteAfterTTL(ctx, hj, KindHyperJob, ttl, due)
}

// deleteAfterTTL deletes a finished workload whose TTL expired, in the foreground (its children go
// first, through the garbage collector). The delete is conditioned on the UID and resourceVersion
// of the object the decision was made from: a workload recreated under the same name, or changed
// since (the cache was behind), is never deleted — the apiserver answers Conflict and the next pass
// decides again from the newer object. One API call per deletion, no extra read.
func (r *Reconciler) deleteAfterTTL(ctx context.Context, obj client.Object, kind string, ttl time.Duration, due time.Time) error {
	now := r.now()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationForeground))
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("TTL deletion refused: the "+kind+" changed or was replaced since it was read", "reason", err.Error())
		return errRetry
	default:
		return fmt.Errorf("deleting %s %s/%s after its TTL: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	observe(kind, ActionTTLDelete, now, due)
	r.recorder.Eventf(obj, corev1.EventTypeNormal, ReasonTTLExpired,
		"deleted (foreground) %s after it finished, as %s asks", ttl, ttlKey)
	log.FromContext(ctx).V(1).Info("deleted finished "+kind+" after its TTL", "ttl", ttl, "lag", now.Sub(due))
	return nil
}

// errRetry asks for another pass soon without counting an error: the cache is behind.
var errRetry = errors.New("retry")
