package podgroupstatus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// Field indexes on the manager's cache.
const (
	// memberIndex indexes pods by their scheduling.k8s.io/group-name annotation (PodGroup name).
	memberIndex = "hyperbatch.dev/podgroupstatus-group"
	// queueIndex indexes PodGroups by spec.queue ("default" when empty).
	queueIndex = "hyperbatch.dev/podgroupstatus-queue"
	// ownerJobIndex indexes PodGroups by the name of their controlling Volcano Job.
	ownerJobIndex = "hyperbatch.dev/podgroupstatus-owner-job"
)

// DefaultSchedulerName is the scheduler whose PodGroups the controller serves by default.
const DefaultSchedulerName = "hyperbatch-scheduler"

const (
	// ControllerName names the controller (its logs and metrics).
	ControllerName = "podgroupstatus"
	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-podgroupstatus"
)

// Options configure the controller; zero values take the defaults.
type Options struct {
	// SchedulerName: PodGroups of this scheduler are served (default hyperbatch-scheduler).
	SchedulerName string
	// MinDetailInterval is the shortest time between two writes to one PodGroup that change only
	// counts or messages (default 1s). Phase and condition status/reason changes are written at once.
	MinDetailInterval time.Duration
	// MaxConcurrentReconciles (default 4). Enqueue decisions are serialized per Queue whatever this is.
	MaxConcurrentReconciles int
}

// Reconciler keeps the phase, counts and conditions of served PodGroups.
type Reconciler struct {
	client   client.Client
	writer   *statusWriter
	recorder record.EventRecorder
	opts     Options
	now      func() time.Time

	mu sync.Mutex
	// written remembers, per PodGroup, the phase this process last wrote and the resourceVersion it
	// wrote over: while the cache still holds that older version, the written phase counts (so two
	// quick enqueue decisions in one queue never both see the older, unreserved state).
	written map[types.NamespacedName]writeRecord
	// queueLocks serialize enqueue decisions (and their writes) per Queue.
	queueLocks map[string]*sync.Mutex
}

type writeRecord struct {
	prevRV string
	phase  schedulingv1beta1.PodGroupPhase
	detail time.Time // last write of any kind, for MinDetailInterval
	wrote  bool      // the record is from a write (not a reservation ahead of one)
	// served caches whether the PodGroup is served, for the queue's decisions (which must not look
	// up every waiting gang's Job and pods); set by the PodGroup's own reconcile.
	served, servedKnown bool
}

// NewReconciler builds a Reconciler from the manager's cached client.
func NewReconciler(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.SchedulerName == "" {
		opts.SchedulerName = DefaultSchedulerName
	}
	if opts.MinDetailInterval <= 0 {
		opts.MinDetailInterval = time.Second
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating discovery client for the PodGroup status subresource check: %w", err)
	}
	return &Reconciler{
		client:     mgr.GetClient(),
		writer:     &statusWriter{c: mgr.GetClient(), disc: disc},
		recorder:   mgr.GetEventRecorderFor(EventSource),
		opts:       opts,
		now:        time.Now,
		written:    map[types.NamespacedName]writeRecord{},
		queueLocks: map[string]*sync.Mutex{},
	}, nil
}

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups/status,verbs=get;patch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=queues,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch.volcano.sh,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the indexes and watches: PodGroups, their member pods (only the events
// that can change a status: memberPodChanges), Queues and Volcano Jobs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	registerMetrics()
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Pod{}, memberIndex, func(o client.Object) []string {
		if n := o.GetAnnotations()[schedulingv1beta1.KubeGroupNameAnnotationKey]; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	if err := idx.IndexField(ctx, &schedulingv1beta1.PodGroup{}, queueIndex, func(o client.Object) []string {
		return []string{queueOf(o.(*schedulingv1beta1.PodGroup))}
	}); err != nil {
		return fmt.Errorf("indexing PodGroups by queue: %w", err)
	}
	if err := idx.IndexField(ctx, &schedulingv1beta1.PodGroup{}, ownerJobIndex, func(o client.Object) []string {
		if ref := ownerJobRef(o); ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing PodGroups by owning Volcano Job: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Watches(&schedulingv1beta1.PodGroup{}, r.podGroupHandler()).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := groupOf(o); n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: n}}}
			}
			return nil
		}), builder.WithPredicates(memberPodChanges)).
		Watches(&schedulingv1beta1.Queue{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.waitingInQueue(ctx, o.GetName())
		})).
		Watches(&batchv1alpha1.Job{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var list schedulingv1beta1.PodGroupList
			if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{ownerJobIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
				log.FromContext(ctx).Error(err, "listing PodGroups of a Volcano Job", "job", client.ObjectKeyFromObject(o))
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(list.Items))
			for i := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
			return reqs
		})).
		Complete(r)
}

// podGroupHandler enqueues the PodGroup itself and, when it stops reserving its queue's capability
// (finished, deleted, moved, resized), the queue's waiting PodGroups.
func (r *Reconciler) podGroupHandler() handler.EventHandler {
	type q = workqueue.TypedRateLimitingInterface[reconcile.Request]
	self := func(o client.Object, w q) {
		w.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	peers := func(ctx context.Context, queue string, w q) {
		for _, req := range r.waitingInQueue(ctx, queue) {
			w.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, w q) { self(e.Object, w) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, w q) {
			self(e.ObjectNew, w)
			oldPG, ok1 := e.ObjectOld.(*schedulingv1beta1.PodGroup)
			newPG, ok2 := e.ObjectNew.(*schedulingv1beta1.PodGroup)
			if !ok1 || !ok2 || !reserving(oldPG.Status.Phase) {
				return
			}
			if !reserving(newPG.Status.Phase) || queueOf(oldPG) != queueOf(newPG) ||
				!equality.Semantic.DeepEqual(oldPG.Spec.MinResources, newPG.Spec.MinResources) {
				peers(ctx, queueOf(oldPG), w)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, w q) {
			self(e.Object, w)
			if pg, ok := e.Object.(*schedulingv1beta1.PodGroup); ok && reserving(pg.Status.Phase) {
				peers(ctx, queueOf(pg), w)
			}
		},
	}
}

// waitingInQueue lists the PodGroups of a queue that have not been enqueued (any scheduler; the
// reconcile skips those it does not serve).
func (r *Reconciler) waitingInQueue(ctx context.Context, queue string) []reconcile.Request {
	var list schedulingv1beta1.PodGroupList
	if err := r.client.List(ctx, &list, client.MatchingFields{queueIndex: queue}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing PodGroups of a queue", "queue", queue)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if waiting(list.Items[i].Status.Phase) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func reserving(p schedulingv1beta1.PodGroupPhase) bool {
	return p == schedulingv1beta1.PodGroupInqueue || p == schedulingv1beta1.PodGroupRunning
}

func waiting(p schedulingv1beta1.PodGroupPhase) bool {
	return p == "" || p == schedulingv1beta1.PodGroupPending
}

func queueOf(pg *schedulingv1beta1.PodGroup) string {
	if pg.Spec.Queue == "" {
		return schedulingv1beta1.DefaultQueue
	}
	return pg.Spec.Queue
}

// ownerJobRef is the PodGroup's controlling Volcano Job reference, if any.
func ownerJobRef(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, batchv1alpha1.SchemeGroupVersion.Group+"/") {
		return nil
	}
	return ref
}

// Reconcile brings one PodGroup's status in line with its pods, its Job and its queue.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pg schedulingv1beta1.PodGroup
	if err := r.client.Get(ctx, req.NamespacedName, &pg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading PodGroup %s: %w", req.NamespacedName, err)
	}
	if r.stale(&pg) {
		return ctrl.Result{}, nil // our own newer write is on its way to the cache and will requeue
	}
	served, job, pods, err := r.served(ctx, &pg)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.setServed(req.NamespacedName, served)
	if !served {
		notServedTotal.Inc()
		return ctrl.Result{}, nil
	}
	c := countPods(pods)
	phase, needsAdmission := nextPhase(pg.Status.Phase, c, pg.Spec.MinMember, job != nil, job)
	if !needsAdmission {
		return r.apply(ctx, &pg, phase, c, nil)
	}
	unlock := r.lockQueue(queueOf(&pg))
	v, err := r.decide(ctx, &pg)
	if err != nil {
		unlock()
		return ctrl.Result{}, err
	}
	phase = schedulingv1beta1.PodGroupPending
	if v.admit {
		phase = schedulingv1beta1.PodGroupInqueue
		// Reserve before the write, so the queue's next decision (which may run while this write
		// is in flight) counts this gang; undone if the write does not happen.
		r.reserve(client.ObjectKeyFromObject(&pg), pg.ResourceVersion)
	}
	unlock()
	res, err := r.apply(ctx, &pg, phase, c, &v)
	if v.admit {
		r.unreserve(client.ObjectKeyFromObject(&pg), pg.ResourceVersion)
	}
	return res, err
}

// reserve marks the PodGroup (at resourceVersion rv) as Inqueue for the queue's decisions.
func (r *Reconciler) reserve(key types.NamespacedName, rv string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.written[key]
	w.prevRV, w.phase, w.wrote = rv, schedulingv1beta1.PodGroupInqueue, false
	r.written[key] = w
}

// unreserve drops a reservation whose write did not happen (the record still names the version the
// write would have replaced; after a successful write, apply's recordWrite has moved it on, since
// apply leaves pg at the new version).
func (r *Reconciler) unreserve(key types.NamespacedName, rvNow string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.written[key]; ok && w.prevRV == rvNow && w.phase == schedulingv1beta1.PodGroupInqueue && !w.wrote {
		w.prevRV, w.phase = "", ""
		r.written[key] = w
	}
}

// served reports whether the PodGroup is this scheduler's (see the package documentation) and
// returns its owning Volcano Job (nil if none) and member pods.
func (r *Reconciler) served(ctx context.Context, pg *schedulingv1beta1.PodGroup) (bool, *batchv1alpha1.Job, []*corev1.Pod, error) {
	job, err := r.ownerJob(ctx, pg)
	if err != nil {
		return false, nil, nil, err
	}
	if job != nil && job.Spec.SchedulerName != r.opts.SchedulerName {
		return false, job, nil, nil
	}
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(pg.Namespace), client.MatchingFields{memberIndex: pg.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return false, nil, nil, fmt.Errorf("listing pods of PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	served := job != nil
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
		if list.Items[i].Spec.SchedulerName == r.opts.SchedulerName {
			served = true
		}
	}
	return served, job, pods, nil
}

// decide runs the enqueue rule for pg's queue and returns pg's verdict. Called with the queue's lock.
func (r *Reconciler) decide(ctx context.Context, pg *schedulingv1beta1.PodGroup) (verdict, error) {
	key := client.ObjectKeyFromObject(pg)
	name := queueOf(pg)
	var q schedulingv1beta1.Queue
	qp := &q
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &q); err != nil {
		if !apierrors.IsNotFound(err) {
			return verdict{}, fmt.Errorf("reading Queue %s of PodGroup %s: %w", name, key, err)
		}
		qp = nil
	}
	if qp == nil || !queueOpen(qp) || len(qp.Spec.Capability) == 0 {
		// No capacity to share: the decision does not depend on the other gangs.
		prio, err := r.priority(ctx, pg)
		if err != nil {
			return verdict{}, err
		}
		return admitQueue(name, qp, nil, []candidate{{key: key, priority: prio, created: pg.CreationTimestamp.Time}})[key], nil
	}
	var list schedulingv1beta1.PodGroupList
	if err := r.client.List(ctx, &list, client.MatchingFields{queueIndex: name}, client.UnsafeDisableDeepCopy); err != nil {
		return verdict{}, fmt.Errorf("listing PodGroups of queue %s: %w", name, err)
	}
	var reserved corev1.ResourceList
	var cands []candidate
	for i := range list.Items {
		other := &list.Items[i]
		okey := client.ObjectKeyFromObject(other)
		ph := r.effectivePhase(other)
		if okey == key {
			continue // this gang is decided below (a Running gang that lost pods reserves nothing meanwhile)
		}
		if reserving(ph) {
			price, err := r.price(ctx, other)
			if err != nil {
				return verdict{}, err
			}
			reserved = addResources(reserved, price)
			continue
		}
		if !waiting(ph) {
			continue
		}
		srv, known := r.isServed(okey)
		if !known { // not reconciled yet (e.g. just after a restart): look it up once
			var err error
			if srv, _, _, err = r.served(ctx, other); err != nil {
				return verdict{}, err
			}
			r.setServed(okey, srv)
		}
		if !srv {
			continue // not ours: Volcano's scheduler decides it
		}
		prio, err := r.priority(ctx, other)
		if err != nil {
			return verdict{}, err
		}
		price, err := r.price(ctx, other)
		if err != nil {
			return verdict{}, err
		}
		cands = append(cands, candidate{key: okey, priority: prio, created: other.CreationTimestamp.Time, min: price, stated: stated(other)})
	}
	price, err := r.price(ctx, pg)
	if err != nil {
		return verdict{}, err
	}
	prio, err := r.priority(ctx, pg)
	if err != nil {
		return verdict{}, err
	}
	cands = append(cands, candidate{key: key, priority: prio, created: pg.CreationTimestamp.Time, min: price, stated: stated(pg)})
	return admitQueueFor(name, qp, reserved, cands, &key)[key], nil
}

// ownerJob returns the Volcano Job that controls the PodGroup, or nil when it has none or the Job
// named by its owner reference is gone or was replaced (another UID).
func (r *Reconciler) ownerJob(ctx context.Context, pg *schedulingv1beta1.PodGroup) (*batchv1alpha1.Job, error) {
	ref := ownerJobRef(pg)
	if ref == nil {
		return nil, nil
	}
	var j batchv1alpha1.Job
	err := r.client.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: ref.Name}, &j)
	switch {
	case err == nil && j.UID == ref.UID:
		return &j, nil
	case err == nil || apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, fmt.Errorf("reading Volcano Job %s/%s of PodGroup %s: %w", pg.Namespace, ref.Name, pg.Name, err)
	}
}

// price is what the PodGroup reserves of its queue (gangcontract.Price): its minResources, raised
// to the effective requests of its owning Volcano Job's pods (a resource set only in limits counts).
func (r *Reconciler) price(ctx context.Context, pg *schedulingv1beta1.PodGroup) (corev1.ResourceList, error) {
	job, err := r.ownerJob(ctx, pg)
	if err != nil {
		return nil, err
	}
	var lookupErr error
	price := gangcontract.Price(pg.Spec.MinResources, job, func(class string) int32 {
		v, err := r.classValue(ctx, class)
		if err != nil && lookupErr == nil {
			lookupErr = fmt.Errorf("pricing PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
		}
		return v
	})
	return price, lookupErr
}

// stated is the PodGroup's spec.minResources (nil when unset).
func stated(pg *schedulingv1beta1.PodGroup) corev1.ResourceList {
	if pg.Spec.MinResources == nil {
		return nil
	}
	return *pg.Spec.MinResources
}

// classValue is a PriorityClass's value, 0 when it does not exist.
func (r *Reconciler) classValue(ctx context.Context, name string) (int32, error) {
	var pc schedulingv1.PriorityClass
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &pc); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("reading PriorityClass %s: %w", name, err)
	}
	return pc.Value, nil
}

// priority is the value of the PodGroup's PriorityClass (0 when unset or unknown, as the plugin does
// for a pod without priority).
func (r *Reconciler) priority(ctx context.Context, pg *schedulingv1beta1.PodGroup) (int32, error) {
	if pg.Spec.PriorityClassName == "" {
		return 0, nil
	}
	var pc schedulingv1.PriorityClass
	if err := r.client.Get(ctx, types.NamespacedName{Name: pg.Spec.PriorityClassName}, &pc); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("reading PriorityClass %s of PodGroup %s/%s: %w", pg.Spec.PriorityClassName, pg.Namespace, pg.Name, err)
	}
	return pc.Value, nil
}

// apply writes the desired status if it differs from the stored one and emits the Events.
//
// Events: at most one per change of the enqueue outcome (Enqueued once; a refusal only when its
// reason differs from the PodGroup's current Unschedulable reason), so a PodGroup gets a handful of
// Events over its life, far below client-go's per-object spam filter (25 per burst). The scheduler
// plugin's own GangWaiting/GangScheduled Events are not repeated here.
func (r *Reconciler) apply(ctx context.Context, pg *schedulingv1beta1.PodGroup, phase schedulingv1beta1.PodGroupPhase, c podCounts, v *verdict) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(pg)
	now := r.now()
	desired := desiredStatus(pg.Status, phase, c, pg.Spec.MinMember, v, now)
	if equality.Semantic.DeepEqual(desired, pg.Status) {
		return ctrl.Result{}, nil
	}
	major := majorChange(pg.Status, desired)
	if !major {
		if wait := r.detailWait(key, now); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	old := pg.Status.DeepCopy()
	prevRV := pg.ResourceVersion
	if err := r.writer.write(ctx, pg, desired); err != nil {
		if apierrors.IsConflict(err) {
			// A newer version exists; its watch event requeues the PodGroup (the delay covers a
			// newer version that is already in the cache).
			return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing status of PodGroup %s: %w", key, err)
	}
	r.recordWrite(key, prevRV, desired.Phase, now)
	if major {
		writesTotal.WithLabelValues(changePhase).Inc()
	} else {
		writesTotal.WithLabelValues(changeDetail).Inc()
	}
	logger := log.FromContext(ctx)
	if old.Phase != desired.Phase {
		logger.V(1).Info("PodGroup phase changed", "podGroup", key, "from", old.Phase, "to", desired.Phase)
	}
	if v != nil && v.admit && desired.Phase == schedulingv1beta1.PodGroupInqueue && old.Phase != desired.Phase {
		enqueueSeconds.Observe(now.Sub(pg.CreationTimestamp.Time).Seconds())
		r.recorder.Event(pg, corev1.EventTypeNormal, ReasonEnqueued, v.message)
	}
	if v != nil && !v.admit {
		if prev := findCondition(old.Conditions, schedulingv1beta1.PodGroupUnschedulableType); prev == nil || prev.Status != corev1.ConditionTrue || prev.Reason != v.reason {
			refusalsTotal.WithLabelValues(v.reason).Inc()
			r.recorder.Event(pg, corev1.EventTypeWarning, v.reason, v.message)
		}
	}
	return ctrl.Result{}, nil
}

// majorChange: the phase, or a condition's presence, status or reason, differs.
func majorChange(a, b schedulingv1beta1.PodGroupStatus) bool {
	if a.Phase != b.Phase || len(a.Conditions) != len(b.Conditions) {
		return true
	}
	for _, cb := range b.Conditions {
		ca := findCondition(a.Conditions, cb.Type)
		if ca == nil || ca.Status != cb.Status || ca.Reason != cb.Reason {
			return true
		}
	}
	return false
}

func (r *Reconciler) lockQueue(name string) func() {
	r.mu.Lock()
	l := r.queueLocks[name]
	if l == nil {
		l = &sync.Mutex{}
		r.queueLocks[name] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// stale says whether the cached PodGroup is older than this process's last write to it.
func (r *Reconciler) stale(pg *schedulingv1beta1.PodGroup) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.written[client.ObjectKeyFromObject(pg)]
	return ok && w.wrote && w.prevRV != "" && w.prevRV == pg.ResourceVersion
}

// effectivePhase is the PodGroup's phase, or the phase this process wrote if the cache has not seen
// that write yet.
func (r *Reconciler) effectivePhase(pg *schedulingv1beta1.PodGroup) schedulingv1beta1.PodGroupPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.written[client.ObjectKeyFromObject(pg)]; ok && w.prevRV == pg.ResourceVersion {
		return w.phase
	}
	return pg.Status.Phase
}

func (r *Reconciler) recordWrite(key types.NamespacedName, prevRV string, phase schedulingv1beta1.PodGroupPhase, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.written[key]
	w.prevRV, w.phase, w.detail, w.wrote = prevRV, phase, now, true
	r.written[key] = w
}

func (r *Reconciler) setServed(key types.NamespacedName, served bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.written[key]
	w.served, w.servedKnown = served, true
	r.written[key] = w
}

// isServed returns the cached served verdict and whether there is one.
func (r *Reconciler) isServed(key types.NamespacedName) (served, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.written[key]
	return w.served, w.servedKnown
}

func (r *Reconciler) detailWait(key types.NamespacedName, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.written[key]
	if !ok || w.detail.IsZero() {
		return 0
	}
	return w.detail.Add(r.opts.MinDetailInterval).Sub(now)
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, key)
}
