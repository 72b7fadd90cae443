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
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// reconcileJobSet enforces a JobSet's deadline.
//
// The mechanism is the one the JobSet controller (v0.11.0) itself respects: a JobSet whose status
// holds a Completed or Failed condition that is True is finished, and on every reconcile of a
// finished JobSet that controller deletes all its active child Jobs in the foreground (so their pods
// go), creates nothing, and applies the JobSet's own ttlSecondsAfterFinished. This controller
// therefore writes Failed=True with reason DeadlineExceeded (and terminalState Failed, as the JobSet
// controller does when it fails a JobSet), guarded by resourceVersion; then it records the reason
// in an annotation and deletes the JobSet's PodGroups.
func (r *Reconciler) reconcileJobSet(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var js jobsetv1alpha2.JobSet
	if err := r.client.Get(ctx, req.NamespacedName, &js); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if js.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if jobSetFailedForDeadline(&js) {
		// Decided earlier (maybe before a restart): finish the follow-up steps.
		return ctrl.Result{}, r.afterJobSetDeadline(ctx, &js)
	}
	start := workload.JobSetStart(&js)
	if start == nil {
		return ctrl.Result{}, nil
	}
	deadline, has, err := ActiveDeadline(&js)
	if err != nil {
		r.recorder.Event(&js, corev1.EventTypeWarning, ReasonInvalidLifecycleAnnotation, err.Error())
		return ctrl.Result{}, nil
	}
	if !has {
		return ctrl.Result{}, nil
	}
	now := r.now()
	due := start.Add(deadline)
	if now.Before(due) {
		var res result
		res.at(now, due)
		return res.ctrl(), nil
	}
	orig := js.DeepCopy()
	msg := fmt.Sprintf("the JobSet ran longer than its active deadline of %s (%s), counted from %s",
		deadline, activeDeadlineKey, start.UTC().Format(time.RFC3339))
	apimeta.SetStatusCondition(&js.Status.Conditions, metav1.Condition{
		Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue, Reason: ReasonDeadlineExceeded,
		Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
	js.Status.TerminalState = string(jobsetv1alpha2.JobSetFailed)
	if err := r.client.Status().Patch(ctx, &js, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		reconcileErrors.WithLabelValues(KindJobSet).Inc()
		return ctrl.Result{}, fmt.Errorf("writing the DeadlineExceeded condition of JobSet %s/%s: %w", js.Namespace, js.Name, err)
	}
	observe(KindJobSet, ActionDeadline, now, due)
	r.recorder.Event(&js, corev1.EventTypeWarning, ReasonDeadlineExceeded, msg+"; the JobSet controller deletes its Jobs")
	log.FromContext(ctx).Info("JobSet deadline exceeded", "jobset", req.NamespacedName, "lag", now.Sub(due))
	return ctrl.Result{}, r.afterJobSetDeadline(ctx, &js)
}

func jobSetFailedForDeadline(js *jobsetv1alpha2.JobSet) bool {
	c := apimeta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonDeadlineExceeded
}

// afterJobSetDeadline records the termination reason on the JobSet and deletes the PodGroups it
// controls (a PodGroup must not outlive the gang it schedules). Both are idempotent.
func (r *Reconciler) afterJobSetDeadline(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	var errs []error
	if js.Annotations[TerminationReasonAnnotation] != ReasonDeadlineExceeded {
		patch := client.RawPatch("application/merge-patch+json",
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, TerminationReasonAnnotation, ReasonDeadlineExceeded)))
		if err := r.client.Patch(ctx, js, patch); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("annotating JobSet %s/%s: %w", js.Namespace, js.Name, err))
		}
	}
	var pgs schedulingv1beta1.PodGroupList
	if err := r.client.List(ctx, &pgs, client.InNamespace(js.Namespace)); err != nil && !apimeta.IsNoMatchError(err) {
		// (No match: Volcano is not installed, so there are no PodGroups.)
		errs = append(errs, fmt.Errorf("listing PodGroups of JobSet %s/%s: %w", js.Namespace, js.Name, err))
	}
	for i := range pgs.Items {
		pg := &pgs.Items[i]
		if !metav1.IsControlledBy(pg, js) || pg.DeletionTimestamp != nil {
			continue
		}
		uid := pg.UID
		if err := r.client.Delete(ctx, pg, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting PodGroup %s/%s of JobSet %s: %w", pg.Namespace, pg.Name, js.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		reconcileErrors.WithLabelValues(KindJobSet).Inc()
		return err
	}
	return nil
}
