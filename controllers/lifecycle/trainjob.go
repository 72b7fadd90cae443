package lifecycle

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;delete

// reconcileTrainJob enforces a TrainJob's TTL after finished (hyperbatch.dev/ttl-seconds-after-finished;
// Trainer v2.3.0 has none of its own): a TrainJob whose Complete or Failed condition is older than the
// TTL is deleted, in the foreground (its JobSet and PodGroup go first, through the garbage
// collector). Its deadline is the native spec.activeDeadlineSeconds, which Trainer enforces.
//
// The decision is derived from the object alone (the condition's lastTransitionTime and the
// annotation), so a restarted manager neither repeats nor forgets a deletion; the delete is
// conditioned on the UID and resourceVersion it was decided from, so a TrainJob recreated under the
// same name is never hit by its predecessor's timer.
func (r *Reconciler) reconcileTrainJob(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tj := defaults.NewTrainJob()
	if err := r.cache.Get(ctx, req.NamespacedName, tj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if tj.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	var res result
	now := r.now()
	if ttl, has, err := TTLAfterFinished(tj); err != nil {
		r.recorder.Event(tj, corev1.EventTypeWarning, ReasonInvalidLifecycleAnnotation, err.Error())
	} else if has {
		if fin := workload.TrainJobFinishedAt(tj); fin != nil {
			due := fin.Add(ttl)
			if now.Before(due) {
				res.at(now, due)
			} else if err := r.deleteTrainJob(ctx, tj, ttl, due); errors.Is(err, errRetry) {
				res.wait(conflictRequeue)
			} else if err != nil {
				reconcileErrors.WithLabelValues(KindTrainJob).Inc()
				return ctrl.Result{}, err
			}
		}
	}
	return res.ctrl(), nil
}

// deleteTrainJob deletes a finished TrainJob whose TTL expired (deleteAfterTTL).
func (r *Reconciler) deleteTrainJob(ctx context.Context, tj *unstructured.Unstructured, ttl time.Duration, due time.Time) error {
	return r.deleteAfterTTL(ctx, tj, KindTrainJob, ttl, due)
}
