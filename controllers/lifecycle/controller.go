package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

const (
	// ControllerName prefixes the three controllers' names (lifecycle-hyperjob, -jobset, -vcjob).
	ControllerName = "lifecycle"
	// FieldOwner is the field manager of every write this package makes.
	FieldOwner = "hyperbatch-lifecycle"
	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-lifecycle"
	// ReasonFailedAbort is the Event reason when the AbortJob Command of an overdue Volcano Job could not be created.
	ReasonFailedAbort = "FailedAbort"

	// childIndex indexes Volcano Jobs by the UID of their controlling HyperJob.
	childIndex = "hyperbatch.dev/lifecycle-hyperjob-uid"

	// conflictRequeue is how soon a write refused by an optimistic lock is retried; the watch event
	// carrying the newer object normally triggers the retry sooner.
	conflictRequeue = 200 * time.Millisecond

	// Actions are API calls, and many fall due in the same second (timestamps have whole-second
	// precision): enough workers to issue them concurrently.
	maxConcurrentReconciles = 16
)

// Annotations this package writes. They are the durable record of a decision: a restarted manager
// reads them and neither repeats nor forgets an action.
const (
	// TerminationReasonAnnotation is set to ReasonDeadlineExceeded on a workload ended for its deadline.
	TerminationReasonAnnotation = "hyperbatch.dev/termination-reason"
	// DeadlineExceededAtAnnotation is the RFC 3339 time a Volcano Job's abort for DeadlineExceeded was
	// decided. A clock that started later (the job was resumed since) starts a new deadline.
	DeadlineExceededAtAnnotation = "hyperbatch.dev/deadline-exceeded-at"
	// AbortCommandAnnotation names the Volcano bus Command created for that decision; once set the
	// Command is never created again.
	AbortCommandAnnotation = "hyperbatch.dev/deadline-abort-command"
)

// Reasons of conditions and Events.
const (
	// ReasonDeadlineExceeded is the reason of the Failed condition (HyperJob, JobSet), of the
	// Command and of the Events of a deadline action.
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonTTLExpired is the reason of the Event of a TTL deletion.
	ReasonTTLExpired = "TTLExpired"
	// ReasonInvalidLifecycleAnnotation is the reason of the Warning Event for an unusable annotation.
	ReasonInvalidLifecycleAnnotation = "InvalidLifecycleAnnotation"
	// ReasonAbortedChildren is the reason of the HyperJob Event that sums up the aborted children.
	ReasonAbortedChildren = "AbortedChildJobs"
)

// +kubebuilder:rbac:groups=training.volcano.sh,resources=hyperjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=training.volcano.sh,resources=hyperjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch.volcano.sh,resources=jobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bus.volcano.sh,resources=commands,verbs=create
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconciler enforces deadlines and TTLs; see the package doc and docs/lifecycle.md.
//
// Events: every action emits one Event on the object acted upon (a child Volcano Job's abort is
// reported on the child, plus one summary per pass on its HyperJob), so no object receives more
// than a handful of Events over its life and client-go's per-object spam filter (a burst of 25,
// then one per 5 minutes) never drops one.
type Reconciler struct {
	client client.Client
	// cache reads from the manager's informers even for unstructured objects (TrainJobs), which the
	// manager's client reads from the apiserver: one GET per reconcile would make 10,000 TTL
	// deletions falling due together wait in line (bench/results/lifecycle.txt).
	cache    client.Reader
	recorder record.EventRecorder
	now      func() time.Time
	// nativeTTL remembers, per process, the UIDs whose native TTL deletion was already counted.
	nativeTTL *seenUIDs
	// onPlane: the manager runs on a Karmada control plane (--mode=control-plane; OnKarmadaPlane).
	// Its Volcano Jobs are templates that run in member clusters, so an abort is only decided here
	// (step 1 of abortVCJob); Karmada carries the decision to the member's copy, where that member's
	// lifecycle controller carries it out (vcjob.go). A cluster that merely has Karmada's CRDs
	// installed is not a plane: its Volcano Jobs run there.
	onPlane bool
}

// OnKarmadaPlane marks the Reconciler as running on a Karmada control plane (the manager's
// --mode=control-plane) and returns it.
func (r *Reconciler) OnKarmadaPlane() *Reconciler {
	r.onPlane = true
	return r
}

// NewReconciler builds a Reconciler from the manager.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	registerMetrics()
	return &Reconciler{
		client:    client.WithFieldOwner(mgr.GetClient(), FieldOwner),
		cache:     mgr.GetCache(),
		recorder:  mgr.GetEventRecorderFor(EventSource),
		now:       time.Now,
		nativeTTL: newSeenUIDs(),
	}
}

// kindController is how this package serves one kind of the registry.
type kindController struct {
	// name suffixes ControllerName in the controller's name.
	name string
	// object is an empty object of the kind (the controller's For).
	object func() client.Object
	// reconcile is the kind's reconciler.
	reconcile reconcileFunc
	// needs are kinds that must be served too (a HyperJob's children are Volcano Jobs).
	needs []defaults.Kind
	// setup adds the kind's own watches and indexes.
	setup func(mgr ctrl.Manager, b *builder.Builder) error
}

// kindControllers are the kinds this package serves, by registry kind. Every row of the kind
// registry with a Lifecycle has one (SetupWithManager refuses to start otherwise, and
// TestEveryLifecycleRowIsServed checks it).
func (r *Reconciler) kindControllers() map[defaults.Kind]kindController {
	return map[defaults.Kind]kindController{
		defaults.KindVolcanoJob: {name: "vcjob", object: func() client.Object { return &batchv1alpha1.Job{} }, reconcile: r.reconcileVCJob},
		defaults.KindJobSet: {name: "jobset", object: func() client.Object { return &jobsetv1alpha2.JobSet{} }, reconcile: r.reconcileJobSet,
			setup: setupJobSet},
		defaults.KindHyperJob: {name: "hyperjob", object: func() client.Object { return &trainingv1alpha1.HyperJob{} }, reconcile: r.reconcileHyperJob,
			needs: []defaults.Kind{defaults.KindVolcanoJob}, setup: setupHyperJob},
		defaults.KindTrainJob: {name: "trainjob", object: func() client.Object { return defaults.NewTrainJob() }, reconcile: r.reconcileTrainJob},
	}
}

// SetupWithManager registers one controller per row of the kind registry with a Lifecycle
// (HyperJobs: deadline, children's abort, TTL; JobSets and Volcano Jobs: deadline, native TTL
// counted).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	opts := controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}
	// A kind whose CRD the cluster does not serve is left out (with a log line) rather than failing
	// the whole manager: a cluster without JobSet still gets deadlines for Volcano Jobs and HyperJobs.
	served := map[defaults.Kind]bool{}
	serves := func(k defaults.Kind) bool {
		if s, ok := served[k]; ok {
			return s
		}
		spec, _ := defaults.LookupKind(k)
		_, err := mgr.GetRESTMapper().RESTMapping(spec.GVK.GroupKind(), spec.GVK.Version)
		if err != nil {
			ctrl.Log.WithName(ControllerName).Info("kind not served; its lifecycle is not enforced", "kind", spec.GVK.String(), "reason", err.Error())
		}
		served[k] = err == nil
		return err == nil
	}
	if r.onPlane {
		rb := workv1alpha2.SchemeGroupVersion.WithKind("ResourceBinding")
		if _, err := mgr.GetRESTMapper().RESTMapping(rb.GroupKind(), rb.Version); apimeta.IsNoMatchError(err) {
			return fmt.Errorf("%s: the manager runs in --mode=control-plane, but the apiserver serves no Karmada ResourceBindings: point --kubeconfig at the Karmada apiserver, or run with --mode=standalone", ControllerName)
		} else if err != nil {
			return fmt.Errorf("looking up Karmada's ResourceBinding kind: %w", err)
		}
	}
	kinds := r.kindControllers()
	for _, w := range workload.WithLifecycle() {
		kc, ok := kinds[w.Kind]
		if !ok {
			return fmt.Errorf("%s: the kind registry (internal/workload) gives %s a lifecycle, but this controller has no reconciler for it", ControllerName, w.Kind)
		}
		if !serves(w.Kind) || slices.ContainsFunc(kc.needs, func(k defaults.Kind) bool { return !serves(k) }) {
			continue
		}
		b := ctrl.NewControllerManagedBy(mgr).
			Named(ControllerName+"-"+kc.name).
			For(kc.object(), builder.WithPredicates(hasLifecycle)).
			WithOptions(opts)
		if w.Lifecycle.TTL == workload.InNativeField {
			b = b.Watches(kc.object(), r.nativeTTLDeletions(string(w.Kind)))
		}
		if kc.setup != nil {
			if err := kc.setup(mgr, b); err != nil {
				return err
			}
		}
		if err := b.Complete(kc.reconcile); err != nil {
			return fmt.Errorf("setting up the %s lifecycle controller: %w", w.Title, err)
		}
	}
	return nil
}

// setupHyperJob indexes Volcano Jobs by their controlling HyperJob and watches them: a child's
// changes matter only once its HyperJob failed for its deadline (abort until aborted).
func setupHyperJob(mgr ctrl.Manager, b *builder.Builder) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &batchv1alpha1.Job{}, childIndex, func(o client.Object) []string {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "HyperJob" || ref.APIVersion != trainingv1alpha1.SchemeGroupVersion.String() {
			return nil
		}
		return []string{string(ref.UID)}
	}); err != nil {
		return fmt.Errorf("indexing Volcano Jobs by controlling HyperJob: %w", err)
	}
	b.Owns(&batchv1alpha1.Job{})
	return nil
}

// setupJobSet registers the PodGroup informer the JobSet deadline reads (afterJobSetDeadline lists
// the JobSet's PodGroups), so that it starts and syncs with the manager's cache. Started lazily by
// the first List instead, it blocked every worker that reached a deadline first until it synced:
// in BenchmarkJobSetDeadlineAccuracy the first 16 deadlines were written at once and then no worker
// acted for 1.7 s (deadline error p99 1.75 s against 0.31 s for every later second). A cluster
// without Volcano serves no PodGroups and needs no informer.
func setupJobSet(mgr ctrl.Manager, _ *builder.Builder) error {
	pg := schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup")
	if _, err := mgr.GetRESTMapper().RESTMapping(pg.GroupKind(), pg.Version); apimeta.IsNoMatchError(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up Volcano's PodGroup kind: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(context.Background(), &schedulingv1beta1.PodGroup{}); err != nil {
		return fmt.Errorf("registering the PodGroup informer of the JobSet lifecycle controller: %w", err)
	}
	return nil
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

// hasLifecycle passes objects this package may act on: those carrying a lifecycle annotation or a
// record of an earlier action (a Volcano Job aborted as a HyperJob's child carries only the latter).
var hasLifecycle = predicate.NewPredicateFuncs(func(o client.Object) bool {
	a := o.GetAnnotations()
	for _, k := range []string{activeDeadlineKey, ttlKey, DeadlineExceededAtAnnotation, TerminationReasonAnnotation} {
		if _, ok := a[k]; ok {
			return true
		}
	}
	return false
})

// result folds due times into one RequeueAfter: the earliest future due time.
type result struct{ after time.Duration }

func (r *result) at(now, due time.Time) {
	d := due.Sub(now)
	if d <= 0 {
		d = time.Millisecond
	}
	if r.after == 0 || d < r.after {
		r.after = d
	}
}

func (r *result) wait(d time.Duration) {
	if r.after == 0 || d < r.after {
		r.after = d
	}
}

func (r result) ctrl() ctrl.Result { return ctrl.Result{RequeueAfter: r.after} }

// nativeTTLDeletions counts, in the metrics, the deletion of a finished object whose native
// spec.ttlSecondsAfterFinished has expired: its own controller (JobSet's, Volcano's garbage
// collector) deleted it. It only observes; it enqueues nothing.
func (r *Reconciler) nativeTTLDeletions(kind string) handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if e.ObjectNew.GetDeletionTimestamp() != nil {
				r.countNativeTTL(kind, e.ObjectNew, e.ObjectNew.GetDeletionTimestamp().Time)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			at := r.now()
			if ts := e.Object.GetDeletionTimestamp(); ts != nil {
				at = ts.Time
			}
			r.countNativeTTL(kind, e.Object, at)
			r.nativeTTL.forget(e.Object.GetUID())
		},
	}
}

func (r *Reconciler) countNativeTTL(kind string, obj client.Object, at time.Time) {
	w, ok := workload.Lookup(defaults.Kind(kind))
	if !ok || w.Lifecycle == nil || w.Lifecycle.NativeTTL == nil {
		return
	}
	ttl, finishedAt := w.Lifecycle.NativeTTL(obj), w.Lifecycle.FinishedAt(obj)
	if ttl == nil || finishedAt == nil {
		return
	}
	due := finishedAt.Add(time.Duration(*ttl) * time.Second)
	// A deletion well before the TTL expired was someone else's (a user's kubectl delete).
	if at.Before(due.Add(-time.Second)) {
		return
	}
	if !r.nativeTTL.add(obj.GetUID()) {
		return
	}
	observe(kind, ActionNativeTTLDelete, at, due)
}
