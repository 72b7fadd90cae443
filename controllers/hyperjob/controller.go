package hyperjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

const (
	// ControllerName names the controller (metrics, logs).
	ControllerName = "hyperjob"
	// FieldOwner is the field manager of every write this controller makes.
	FieldOwner = "hyperbatch-hyperjob"

	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-hyperjob"
	// ReasonFailedUpdateStatus is the Event reason when the HyperJob's status could not be written.
	ReasonFailedUpdateStatus = "FailedUpdateStatus"
	// eventSourceChildren is the source of the per-pass summaries of child actions (events.go).
	eventSourceChildren = "hyperbatch-hyperjob-children"

	// controllerUIDIndex indexes children by the UID of their controlling HyperJob.
	controllerUIDIndex = "hyperbatch.dev/hyperjob-controller-uid"

	childReplicatedJobLabel = hbv1.ReplicatedJobNameLabel

	maxConcurrentReconciles = 4
	// staleCacheRequeue is how soon a reconcile that found its cached HyperJob stale is retried
	// (the watch event that refreshes the cache normally triggers it sooner).
	staleCacheRequeue = time.Second
)

// RBAC of this controller (config/rbac is generated from these markers).
// +kubebuilder:rbac:groups=training.volcano.sh,resources=hyperjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=training.volcano.sh,resources=hyperjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch.volcano.sh,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy.karmada.io,resources=propagationpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=work.karmada.io,resources=resourcebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconciler splits HyperJobs into Volcano Jobs and Karmada PropagationPolicies and aggregates their
// status. See docs/hyperjob.md.
//
// Deletion is left to the garbage collector: every child has a controller ownerReference to its
// HyperJob, and all children live in the HyperJob's namespace on the same apiserver, so deleting the
// HyperJob deletes them (foreground or background, as the user asked). A finalizer would add a write
// per HyperJob, block deletion of HyperJobs whenever this controller is down or uninstalled, and buy
// nothing: there is no external state to clean up.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  record.EventRecorder
	// childRecorder reports the children's activity (events.go), with its own spam-filter budget.
	childRecorder record.EventRecorder
	exp           *expectations
	// gateDispatch: Karmada's ResourceBindings are served (the control plane), so children are
	// dispatched all or nothing (dispatch.go).
	gateDispatch bool
	// memberPods counts a finished child's pods in its member cluster (memberpods.go); set with
	// gateDispatch.
	memberPods memberPodCounter
	// watchMembers: Karmada's Cluster kind is served; children on not-Ready members are reported
	// (memberloss.go).
	watchMembers bool
	// auto decides splitPolicy mode auto (autodecide.go); nil when the apiserver serves no Karmada
	// Clusters (then mode auto is refused).
	auto *autoDecider
}

// NewReconciler builds a Reconciler from the manager: its cached client (every write carries the
// field manager FieldOwner), its uncached reader and an Event recorder.
//
// The per-pass summaries get a recorder of their own (newChildRecorder, events.go) whose Events are
// never folded into "(combined from similar events)"; it is started by SetupWithManager.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	registerMetrics()
	return &Reconciler{
		client:    client.WithFieldOwner(mgr.GetClient(), FieldOwner),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorderFor(EventSource),
		exp:       newExpectations(),
	}
}

// SetupWithManager registers the controller: HyperJobs, the Volcano Jobs and PropagationPolicies
// they control, and the WorkloadPolicies and Namespaces that decide the PropagationPolicies' defaults.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	if r.childRecorder == nil {
		rec, err := newChildRecorder(mgr)
		if err != nil {
			return err
		}
		r.childRecorder = rec
	}
	for _, obj := range []client.Object{&batchv1alpha1.Job{}, &policyv1alpha1.PropagationPolicy{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, controllerUIDIndex, indexByController); err != nil {
			return fmt.Errorf("indexing %T by controlling HyperJob: %w", obj, err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &batchv1alpha1.Job{}, heldIndex, indexHeld); err != nil {
		return fmt.Errorf("indexing held Volcano Jobs by HyperJob name: %w", err)
	}
	bld := ctrl.NewControllerManagedBy(mgr)
	rbKind := workv1alpha2.SchemeGroupVersion.WithKind("ResourceBinding")
	if _, err := mgr.GetRESTMapper().RESTMapping(rbKind.GroupKind(), rbKind.Version); err == nil {
		r.gateDispatch = true
		if r.memberPods == nil {
			r.memberPods = clusterProxyPodCounter(mgr.GetConfig())
		}
		bld = bld.Watches(&workv1alpha2.ResourceBinding{}, handler.EnqueueRequestsFromMapFunc(r.hyperJobOfBinding))
	} else if !apimeta.IsNoMatchError(err) {
		return fmt.Errorf("looking up Karmada's ResourceBinding kind: %w", err)
	}
	clusterKind := clusterv1alpha1.SchemeGroupVersion.WithKind("Cluster")
	if _, err := mgr.GetRESTMapper().RESTMapping(clusterKind.GroupKind(), clusterKind.Version); err == nil && r.gateDispatch {
		// Karmada's member Clusters: children on not-Ready members are reported (memberloss.go) and
		// mode auto is decided (autodecide.go), both fed by one watch (clusterwatch.go).
		r.watchMembers = true
		if r.auto == nil {
			r.auto = newAutoDecider(clusterProxyMemberReader(mgr.GetConfig()))
		}
		bld = bld.Watches(&clusterv1alpha1.Cluster{}, r.clusterEvents()).
			Watches(&trainingv1alpha1.HyperJob{}, handler.EnqueueRequestsFromMapFunc(r.hyperJobGone),
				builder.WithPredicates(hyperJobDeleted)).
			Watches(&batchv1alpha1.Job{}, handler.EnqueueRequestsFromMapFunc(r.waitingHyperJobs),
				builder.WithPredicates(childFinished))
	} else if err != nil && !apimeta.IsNoMatchError(err) {
		return fmt.Errorf("looking up Karmada's Cluster kind: %w", err)
	}
	return bld.
		Named(ControllerName).
		For(&trainingv1alpha1.HyperJob{}).
		Owns(&batchv1alpha1.Job{}).
		Owns(&policyv1alpha1.PropagationPolicy{}).
		Watches(&hbv1.WorkloadPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allHyperJobs),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.hyperJobsInNamespace),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Complete(r)
}

func indexByController(obj client.Object) []string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "HyperJob" || ref.APIVersion != trainingv1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return []string{string(ref.UID)}
}

// hyperJobOfBinding maps a ResourceBinding to the HyperJob controlling the Volcano Job it binds.
func (r *Reconciler) hyperJobOfBinding(ctx context.Context, obj client.Object) []reconcile.Request {
	rb, ok := obj.(*workv1alpha2.ResourceBinding)
	if !ok || rb.Spec.Resource.Kind != "Job" || rb.Spec.Resource.APIVersion != batchv1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	var job batchv1alpha1.Job
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: rb.Spec.Resource.Name}, &job); err != nil {
		return nil
	}
	ref := metav1.GetControllerOf(&job)
	if ref == nil || ref.Kind != "HyperJob" || ref.APIVersion != trainingv1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: job.Namespace, Name: ref.Name}}}
}

func (r *Reconciler) allHyperJobs(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.hyperJobRequests(ctx)
}

func (r *Reconciler) hyperJobsInNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	return r.hyperJobRequests(ctx, client.InNamespace(ns.GetName()))
}

func (r *Reconciler) hyperJobRequests(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list trainingv1alpha1.HyperJobList
	if err := r.client.List(ctx, &list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "listing HyperJobs after a WorkloadPolicy or Namespace change")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile brings one HyperJob's children to the plan (syncVCJobAndPP), then writes the aggregated
// status (syncHyperJobStatus). Errors are returned so the workqueue retries with backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	var hj trainingv1alpha1.HyperJob
	if err := r.client.Get(ctx, req.NamespacedName, &hj); err != nil {
		if apierrors.IsNotFound(err) {
			setChildren(req.NamespacedName, -1)
			r.exp.forget(req.NamespacedName)
			// The garbage collector deletes the children (see Reconciler); they are let go.
			return ctrl.Result{}, r.releaseOrphans(ctx, req.NamespacedName, nil)
		}
		reconcileErrors.WithLabelValues(opRead).Inc()
		return ctrl.Result{}, err
	}
	if err := r.releaseOrphans(ctx, req.NamespacedName, &hj); err != nil {
		return ctrl.Result{}, err
	}
	if hj.DeletionTimestamp != nil {
		// The garbage collector deletes the children (see Reconciler); they are let go.
		jobs, _, err := r.listChildren(ctx, &hj)
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.releaseDeleted(ctx, &hj, jobs, nil)
	}

	res, syncErr := r.syncVCJobAndPP(ctx, &hj)
	if res.staleCache {
		return ctrl.Result{RequeueAfter: staleCacheRequeue}, syncErr
	}
	if res.autoRetry {
		// Waiting for room for an auto split: Cluster and HyperJob watch events bring the next
		// decision sooner (autodecide.go).
		defer func() {
			if err == nil && result.RequeueAfter == 0 {
				result.RequeueAfter = autoRetry
			}
		}()
	}
	if res.waitFor > 0 {
		// The cache has not shown this controller's last writes yet; their watch events trigger the
		// next pass. Status waits too, so it is never written from a view missing our own children.
		return ctrl.Result{RequeueAfter: res.waitFor}, nil
	}
	if res.plan == nil && !hyperjobstatus.IsFinished(&hj.Status) {
		return nameTakenResult(ctx, syncErr) // nothing planned: no status to derive
	}
	statusErr := r.syncHyperJobStatus(ctx, &hj, res)
	if hj.Status.SplitCount != nil {
		setChildren(req.NamespacedName, *hj.Status.SplitCount)
	}
	return nameTakenResult(ctx, errors.Join(syncErr, statusErr))
}

// nameTakenResult is a pass's result for its error. Someone else's object holding a child's name is
// no transient failure to back off from exponentially (the delay would grow to minutes and the child
// would start long after the name is freed; the foreign object's deletion triggers no watch event of
// ours): the HyperJob looks again at a steady pace, and the Event on it tells the user.
func nameTakenResult(ctx context.Context, err error) (ctrl.Result, error) {
	if err != nil && onlyNameTaken(err) {
		log.FromContext(ctx).Info("a child's name is taken by a foreign object; checking again later", "reason", err.Error(), "after", nameTakenRequeue)
		return ctrl.Result{RequeueAfter: nameTakenRequeue}, nil
	}
	return ctrl.Result{}, err
}

// syncHyperJobStatus writes the status ComputeStatus derives, when it differs from the stored one.
//
// It uses a JSON merge patch guarded by resourceVersion (optimistic lock) rather than server-side
// apply: the whole status is computed from one read, and the terminal guard (Completed/Failed never
// flip back) relies on never writing a status computed from a stale read — apply would accept it.
// A conflict means the cache is behind the apiserver; it is not an error: the watch event carrying
// the newer HyperJob triggers the next pass, which recomputes the status from it.
func (r *Reconciler) syncHyperJobStatus(ctx context.Context, hj *trainingv1alpha1.HyperJob, res syncResult) error {
	if !hyperjobstatus.IsFinished(&hj.Status) {
		if written, err := r.freezeFinishedCounts(ctx, hj, res); err != nil || !written {
			return err
		}
	}
	st, newly := ComputeStatus(hj, res.plan, res.jobs)
	lost, err := r.lostChildren(ctx, hj, res.jobs)
	if err != nil {
		return err
	}
	lostNow := setMemberLost(hj, &st, lost)
	if apiequality.Semantic.DeepEqual(st, hj.Status) {
		return nil
	}
	orig := hj.DeepCopy()
	hj.Status = st
	if err := r.client.Status().Patch(ctx, hj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		hj.Status = orig.Status
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info("status not written: the cached HyperJob is outdated", "reason", err.Error())
			return nil
		}
		reconcileErrors.WithLabelValues(opStatus).Inc()
		r.recorder.Eventf(hj, corev1.EventTypeWarning, ReasonFailedUpdateStatus, "updating status: %v", err)
		return fmt.Errorf("updating status of HyperJob %s/%s: %w", hj.Namespace, hj.Name, err)
	}
	r.eventForMemberLost(hj, lostNow)
	if newly != nil {
		typ := corev1.EventTypeNormal
		if newly.Type != ConditionCompleted {
			typ = corev1.EventTypeWarning
		}
		r.recorder.Event(hj, typ, newly.Reason, newly.Message)
	}
	return nil
}

// freezeFinishedCounts writes the final counts of children seen finished for the first time into
// the HyperJob's annotation (finalcounts.go), before the status that records them as finished. The
// patch is guarded by resourceVersion, like the status: a view that missed an earlier freeze must
// not overwrite it. hj is updated in place. It reports false (and no error) when the HyperJob
// changed meanwhile: the status is then not written, and the watch event brings the next pass.
func (r *Reconciler) freezeFinishedCounts(ctx context.Context, hj *trainingv1alpha1.HyperJob, res syncResult) (bool, error) {
	fp, err := readFinishedPods(hj)
	if err != nil {
		log.FromContext(ctx).Error(err, "final pod counts of finished children are frozen again from what they report")
	}
	next, changed := freezeFinished(hj, fp, res.plan, res.jobs, r.memberCounts(ctx, hj, fp, res.plan, res.jobs))
	if !changed {
		return true, nil
	}
	v, err := next.encode()
	if err != nil {
		return false, err
	}
	return r.patchAnnotation(ctx, hj, hbv1.FinishedChildPodsAnnotation, v, "final pod counts")
}

// patchAnnotation sets the HyperJob's annotation key to v ("" removes it), guarded by
// resourceVersion: a view that missed an earlier write must not overwrite it. hj is updated in
// place. It reports false (and no error) when the HyperJob changed or went meanwhile: nothing is
// written, and the watch event brings the next pass.
func (r *Reconciler) patchAnnotation(ctx context.Context, hj *trainingv1alpha1.HyperJob, key, v, what string) (bool, error) {
	orig := hj.DeepCopy()
	if v == "" {
		delete(hj.Annotations, key)
	} else {
		if hj.Annotations == nil {
			hj.Annotations = map[string]string{}
		}
		hj.Annotations[key] = v
	}
	if err := r.client.Patch(ctx, hj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		orig.DeepCopyInto(hj)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info(what+" not written: the cached HyperJob is outdated", "reason", err.Error())
			return false, nil
		}
		reconcileErrors.WithLabelValues(opStatus).Inc()
		return false, fmt.Errorf("writing the %s of HyperJob %s/%s: %w", what, hj.Namespace, hj.Name, err)
	}
	return true, nil
}

// cacheIsCurrent reads the HyperJob from the apiserver, bypassing the cache, and reports whether the
// cached copy is current. The controller writes to children only from a current view, so a stale
// cache can never recreate a child of a HyperJob that has already finished, or act on an old spec.
func (r *Reconciler) cacheIsCurrent(ctx context.Context, hj *trainingv1alpha1.HyperJob) (bool, error) {
	var live trainingv1alpha1.HyperJob
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: hj.Namespace, Name: hj.Name}, &live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		reconcileErrors.WithLabelValues(opRead).Inc()
		return false, fmt.Errorf("reading HyperJob %s/%s: %w", hj.Namespace, hj.Name, err)
	}
	return live.UID == hj.UID && live.ResourceVersion == hj.ResourceVersion && live.DeletionTimestamp == nil, nil
}

// errNameTaken marks a child whose name is held by an object this HyperJob does not control.
var errNameTaken = errors.New("child name taken")

// nameTakenRequeue is how often a HyperJob whose child name is taken looks again.
const nameTakenRequeue = 5 * time.Second

// onlyNameTaken reports whether every error joined in err is a taken child name.
func onlyNameTaken(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyNameTaken(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, errNameTaken)
}
