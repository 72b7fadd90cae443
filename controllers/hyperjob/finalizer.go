package hyperjob

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// The durable memory of finished children (docs/hyperjob.md, "Memory of finished children").
//
// Every child Volcano Job is created with the finalizer hbv1.HyperJobChildFinalizer, so deleting it
// (a user, a script, the garbage collector) only marks it. The controller removes the finalizer from
// a marked child unless the child is finished and the HyperJob's status does not hold its final state
// yet: that child stays, still showing its final state, until the status is written, and is released
// by the next pass. Once gone, its recorded state stands and it is never recreated. This is how
// Kubernetes' Job controller tracks pods with finalizers (KEP-2307), applied to children: the record
// is written before anything can make the child vanish, whatever the manager's downtime.

// holdsFinalizer reports whether a child still carries the controller's finalizer.
func holdsFinalizer(j *batchv1alpha1.Job) bool {
	return slices.Contains(j.Finalizers, hbv1.HyperJobChildFinalizer)
}

// mustKeep reports whether a deleted child must keep its finalizer: the HyperJob still acts on its
// children (it exists, is not being deleted and is not finished), the child is finished, it is in
// the plan (desired; nil when the plan is not known yet), and the status the controller read does
// not record it as finished. Everything else is released: an unfinished child may be recreated (it
// never produced a result), a child out of the plan is never recreated, and a finished HyperJob's
// status is frozen, so it never recreates anything.
func mustKeep(hj *trainingv1alpha1.HyperJob, recorded map[string]batchv1alpha1.JobState, desired map[string]bool, j *batchv1alpha1.Job) bool {
	if hj == nil || hj.DeletionTimestamp != nil || hyperjobstatus.IsFinished(&hj.Status) {
		return false
	}
	if !finished(j.Status.State.Phase) || (desired != nil && !desired[j.Name]) {
		return false
	}
	s, ok := recorded[j.Name]
	return !ok || !finished(s.Phase)
}

// releaseDeleted removes the finalizer from every deleted child in jobs that need not keep it
// (mustKeep). hj is nil when the HyperJob is gone; desired is nil when the plan is not known.
func (r *Reconciler) releaseDeleted(ctx context.Context, hj *trainingv1alpha1.HyperJob, jobs map[string]*batchv1alpha1.Job, desired map[string]bool) error {
	var recorded map[string]batchv1alpha1.JobState
	if hj != nil {
		recorded = recordedStates(&hj.Status)
	}
	var errs []error
	for _, j := range jobs {
		if j.DeletionTimestamp == nil || !holdsFinalizer(j) {
			continue
		}
		if mustKeep(hj, recorded, desired, j) {
			log.FromContext(ctx).V(2).Info("keeping a deleted finished child until its state is recorded", "job", j.Name, "phase", j.Status.State.Phase)
			continue
		}
		if _, err := r.removeFinalizer(ctx, j); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeFinalizer removes hbv1.HyperJobChildFinalizer from a child, guarded by its resourceVersion:
// the decision was made from this version of the child (its phase), so a newer one is looked at
// again by the pass its watch event triggers. It reports whether it removed the finalizer; a
// conflict or a child already gone is no error.
func (r *Reconciler) removeFinalizer(ctx context.Context, j *batchv1alpha1.Job) (bool, error) {
	orig := j.DeepCopy()
	j.Finalizers = slices.DeleteFunc(slices.Clone(j.Finalizers), func(f string) bool { return f == hbv1.HyperJobChildFinalizer })
	err := r.client.Patch(ctx, j, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		log.FromContext(ctx).V(2).Info("released child", "job", j.Name, "phase", j.Status.State.Phase)
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		j.Finalizers = orig.Finalizers
		return false, nil
	default:
		j.Finalizers = orig.Finalizers
		reconcileErrors.WithLabelValues(opRelease).Inc()
		return false, fmt.Errorf("removing finalizer %s from Volcano Job %s: %w", hbv1.HyperJobChildFinalizer, j.Name, err)
	}
}

// heldIndex indexes the deleted Volcano Jobs that still carry the finalizer by the name of their
// controlling HyperJob, so the children of a HyperJob that is gone are found without a scan.
const heldIndex = "hyperbatch.dev/hyperjob-held-by-name"

func indexHeld(obj client.Object) []string {
	j, ok := obj.(*batchv1alpha1.Job)
	if !ok || j.DeletionTimestamp == nil || !holdsFinalizer(j) {
		return nil
	}
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.Kind != "HyperJob" || ref.APIVersion != trainingv1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return []string{ref.Name}
}

// releaseOrphans releases the deleted children of a HyperJob that no longer exists (deleted in the
// background, or replaced by a new HyperJob of the same name, current): nothing can recreate them.
func (r *Reconciler) releaseOrphans(ctx context.Context, key client.ObjectKey, current *trainingv1alpha1.HyperJob) error {
	var jl batchv1alpha1.JobList
	if err := r.client.List(ctx, &jl, client.InNamespace(key.Namespace), client.MatchingFields{heldIndex: key.Name}); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return fmt.Errorf("listing children of deleted HyperJob %s: %w", key, err)
	}
	orphans := map[string]*batchv1alpha1.Job{}
	for i := range jl.Items {
		j := &jl.Items[i]
		ref := metav1.GetControllerOf(j)
		if current != nil && ref != nil && ref.UID == current.UID {
			continue
		}
		orphans[j.Name] = j
	}
	return r.releaseDeleted(ctx, nil, orphans, nil)
}
