package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// reconcileVCJob enforces a Volcano Job's deadline: once it has run (outside Aborting/Aborted, the
// suspended state) for hyperbatch.dev/active-deadline-seconds, it is aborted through Volcano's
// command API. It also finishes an abort decided earlier (by this controller or the HyperJob one).
func (r *Reconciler) reconcileVCJob(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var j batchv1alpha1.Job
	if err := r.client.Get(ctx, req.NamespacedName, &j); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if j.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	now := r.now()
	var res result
	start := workload.VCJobStart(&j)
	if start == nil {
		return ctrl.Result{}, nil // suspended or ending: no clock runs
	}
	if decidedAt(&j, *start) != nil {
		// Decided before a restart or a conflict: finish it (create the Command once).
		st, err := r.abortVCJob(ctx, &j, KindVCJob, ActionDeadline, now, "")
		return r.abortResult(st, err)
	}
	deadline, has, err := ActiveDeadline(&j)
	if err != nil {
		r.recorder.Event(&j, corev1.EventTypeWarning, ReasonInvalidLifecycleAnnotation, err.Error())
		return ctrl.Result{}, nil
	}
	if !has {
		return ctrl.Result{}, nil
	}
	due := start.Add(deadline)
	if now.Before(due) {
		res.at(now, due)
		return res.ctrl(), nil
	}
	st, err := r.abortVCJob(ctx, &j, KindVCJob, ActionDeadline, due,
		fmt.Sprintf("the Volcano Job ran longer than its active deadline of %s (%s), counted from %s",
			deadline, activeDeadlineKey, start.UTC().Format(time.RFC3339)))
	return r.abortResult(st, err)
}

func (r *Reconciler) abortResult(st abortState, err error) (ctrl.Result, error) {
	if err != nil {
		reconcileErrors.WithLabelValues(KindVCJob).Inc()
		return ctrl.Result{}, err
	}
	if st == abortConflict {
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	return ctrl.Result{}, nil
}

// decidedAt is the time an abort was decided for the current run of the job (the clock that started
// at start), or nil: a decision older than start belongs to a run that was resumed since.
func decidedAt(j *batchv1alpha1.Job, start time.Time) *time.Time {
	v, ok := j.Annotations[DeadlineExceededAtAnnotation]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || t.Before(start) {
		return nil
	}
	return &t
}

type abortState int

const (
	abortNothing  abortState = iota // not running, or the Command was already created
	abortDecided                    // this call decided the abort (and created the Command)
	abortResumed                    // a decision existed; this call created its Command
	abortConflict                   // a lock refused a write; look again soon
)

// abortVCJob aborts a running Volcano Job for DeadlineExceeded, once:
//
//  1. the decision is recorded on the job (annotations termination-reason and deadline-exceeded-at,
//     a merge patch guarded by resourceVersion) — it is counted, and an Event emitted, only here;
//  2. a bus.volcano.sh/v1alpha1 Command with action AbortJob targeting the job is created under a
//     name derived from the job's UID and the decision time (AlreadyExists means it is there);
//  3. the Command's name is recorded on the job (deadline-abort-command), so the Command, which
//     Volcano deletes once it has executed it, is never created again.
//
// A manager stopped between the steps resumes at the next one. Volcano's job controller then kills
// the pods, deletes the job's PodGroup and moves the job to Aborted. msg empty means only steps 2-3
// may remain.
//
// On a Karmada control plane (r.onPlane) only step 1 runs: the job there is a template, no Volcano
// controller reads Commands there, and a Command there would target the template. Karmada copies
// the decision's annotations onto the member's copy, and the member's lifecycle controller, seeing
// a decision without its Command, runs steps 2-3 where the job runs (Volcano's retention keeps that
// update acceptable: internal/karmadainterpreter).
func (r *Reconciler) abortVCJob(ctx context.Context, j *batchv1alpha1.Job, kind, action string, due time.Time, msg string) (abortState, error) {
	start := workload.VCJobStart(j)
	if start == nil || j.DeletionTimestamp != nil {
		return abortNothing, nil
	}
	state := abortResumed
	at := decidedAt(j, *start)
	if at == nil {
		if msg == "" {
			return abortNothing, nil
		}
		now := r.now().UTC().Truncate(time.Second)
		if now.Before(*start) {
			now = *start // clock skew: the decision must not look older than the run it ends
		}
		orig := j.DeepCopy()
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations[TerminationReasonAnnotation] = ReasonDeadlineExceeded
		j.Annotations[DeadlineExceededAtAnnotation] = now.Format(time.RFC3339)
		delete(j.Annotations, AbortCommandAnnotation)
		if err := r.client.Patch(ctx, j, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			*j = *orig
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return abortConflict, nil
			}
			return abortNothing, fmt.Errorf("recording the DeadlineExceeded decision on Volcano Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		observe(kind, action, r.now(), due)
		how := "; aborting it through Volcano's AbortJob command"
		if r.onPlane {
			how = "; the decision goes with this template to its member cluster, whose hyperbatch lifecycle controller aborts the job there"
		}
		r.recorder.Event(j, corev1.EventTypeWarning, ReasonDeadlineExceeded, msg+how)
		log.FromContext(ctx).Info("Volcano Job deadline exceeded: aborting", "job", client.ObjectKeyFromObject(j), "lag", r.now().Sub(due))
		at, state = &now, abortDecided
	}
	if r.onPlane {
		if state == abortDecided {
			return state, nil
		}
		return abortNothing, nil
	}
	name := commandName(j, *at)
	if j.Annotations[AbortCommandAnnotation] == name {
		if state == abortDecided {
			return state, nil
		}
		return abortNothing, nil
	}
	switch err := r.client.Create(ctx, abortCommand(j, name)); {
	case err == nil && state == abortResumed:
		// A decision recorded earlier: by this controller before a restart, or on the Karmada
		// control plane, from where Karmada copied it here.
		r.recorder.Eventf(j, corev1.EventTypeWarning, ReasonDeadlineExceeded, "aborting it through Volcano's AbortJob command %s, as decided at %s (%s: %s)",
			name, at.UTC().Format(time.RFC3339), TerminationReasonAnnotation, j.Annotations[TerminationReasonAnnotation])
	case err != nil && !apierrors.IsAlreadyExists(err):
		r.recorder.Eventf(j, corev1.EventTypeWarning, ReasonFailedAbort, "creating the AbortJob command %s: %v", name, err)
		return abortNothing, fmt.Errorf("creating AbortJob command %s/%s: %w", j.Namespace, name, err)
	}
	patch := client.RawPatch("application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AbortCommandAnnotation, name)))
	if err := r.client.Patch(ctx, j, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return state, nil
		}
		return abortNothing, fmt.Errorf("recording the AbortJob command on Volcano Job %s/%s: %w", j.Namespace, j.Name, err)
	}
	return state, nil
}

// commandName is {job}-deadline-{8 hex of SHA-256(job UID, decision time)}: one name per decision.
func commandName(j *batchv1alpha1.Job, at time.Time) string {
	sum := sha256.Sum256([]byte(string(j.UID) + "/" + at.UTC().Format(time.RFC3339)))
	return j.Name + "-deadline-" + hex.EncodeToString(sum[:4])
}

// abortCommand is the Command `vcctl job suspend` creates (volcano.sh/volcano pkg/cli/util
// CreateJobCommand): in the job's namespace, owned by the job (so it goes with it), targeting it,
// with action AbortJob; ours also carries reason and message.
func abortCommand(j *batchv1alpha1.Job, name string) *busv1alpha1.Command {
	ref := metav1.NewControllerRef(j, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))
	return &busv1alpha1.Command{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       j.Namespace,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		Action:       string(busv1alpha1.AbortJobAction),
		TargetObject: ref,
		Reason:       ReasonDeadlineExceeded,
		Message:      fmt.Sprintf("%s exceeded (hyperbatch lifecycle controller)", activeDeadlineKey),
	}
}
