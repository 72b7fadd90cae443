package podgroup

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/policyinputs"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// FieldOwner is the server-side apply field manager of every PodGroup this controller writes.
const FieldOwner = "hyperbatch-podgroup"

const (
	// ControllerName names the JobSet gang controller (its logs and metrics).
	ControllerName = "podgroup"
	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-podgroup"
	// ReasonPodGroupReleased is the Event reason when the JobSet's PodGroup is deleted (the JobSet finished or is no gang).
	ReasonPodGroupReleased = "PodGroupReleased"
)

// Event reasons on the JobSet. Each PodGroup phase has its own reason ("PodGroup" + phase), so the
// recorder's per-object spam filter, which keys on reason and message, never hides a phase change
// behind an earlier one; phase Events are sent only when the phase changes (a handful per JobSet).
const (
	ReasonForeignPodGroup = "ForeignPodGroup"
	ReasonInvalidGang     = "InvalidGang"
	ReasonQueueNotAllowed = "QueueNotAllowed"
	ReasonPodGroupPrefix  = "PodGroup"
	// ReasonDefaultSkipped: a policy default was left out of the PodGroup because it would contradict the JobSet.
	ReasonDefaultSkipped = "DefaultSkipped"
	// ReasonMinResourcesKept: the gang's minResources follows existing pods that were admitted with
	// other LimitRange defaults or RuntimeClass overhead than the current ones (PriceFollowingPods),
	// not the price the current ones alone would give.
	ReasonMinResourcesKept = "MinResourcesKept"
	// ReasonGangNotPossible: the JobSet would be a gang, but JobSet creates its pods in stages
	// (defaults.JobSetStagedStart), so it gets no PodGroup.
	ReasonGangNotPossible = "GangNotPossible"
)

// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=limitranges;namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Serves are the kinds whose PodGroup this controller makes.
var Serves = []defaults.Kind{defaults.KindJobSet}

// SubGroupKinds are the kinds whose hyperbatch.dev/subgroup-* annotations this controller turns into
// the PodGroup's subGroupPolicy: a JobSet's own, and a TrainJob's (into Trainer's PodGroup, or into
// the one this controller makes for its JobSet).
var SubGroupKinds = []defaults.Kind{defaults.KindJobSet, defaults.KindTrainJob}

// CheckRegistry fails when the kind registry (internal/workload) says hyperbatch makes the PodGroup
// of a kind this controller does not serve, or turns the sub-group annotations of a kind into
// sub-groups that this controller does not, or the other way round.
func CheckRegistry() error {
	var claimed, subGroups []defaults.Kind
	for _, w := range workload.Gangs(workload.MadeByHyperbatch) {
		claimed = append(claimed, w.Kind)
	}
	if !slices.Equal(claimed, Serves) {
		return fmt.Errorf("%s: the kind registry says hyperbatch makes the PodGroups of %v, but this controller serves %v", ControllerName, claimed, Serves)
	}
	for _, w := range workload.All() {
		if w.Gang != nil && w.Gang.SubGroupAnnotations {
			subGroups = append(subGroups, w.Kind)
		}
	}
	if !slices.Equal(subGroups, SubGroupKinds) {
		return fmt.Errorf("%s: the kind registry says the sub-group annotations of %v become sub-groups, but this controller serves those of %v", ControllerName, subGroups, SubGroupKinds)
	}
	return nil
}

// Reconciler keeps one PodGroup per gang JobSet.
type Reconciler struct {
	client client.Client
	// reader reads the apiserver directly: a TrainJob and its training runtime (not cached).
	reader   client.Reader
	recorder record.EventRecorder

	mu sync.Mutex
	// phases is the PodGroup phase last reported per JobSet UID (Events only on change).
	phases map[types.UID]schedulingv1beta1.PodGroupPhase
	// warned is the foreign PodGroup (by UID) last warned about per JobSet UID (one Event each).
	warned map[types.UID]types.UID
	// kept is the pair of prices last reported (MinResourcesKept) per JobSet UID.
	kept map[types.UID]string
	// staged is the staged-start feature last reported (GangNotPossible) per JobSet UID.
	staged map[types.UID]string
}

// NewReconciler builds a Reconciler from the manager's cached client.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		client:   mgr.GetClient(),
		reader:   mgr.GetAPIReader(),
		recorder: mgr.GetEventRecorderFor(EventSource),
		phases:   map[types.UID]schedulingv1beta1.PodGroupPhase{},
		warned:   map[types.UID]types.UID{},
		kept:     map[types.UID]string{},
		staged:   map[types.UID]string{},
	}
}

// SetupWithManager watches JobSets, PodGroups (mapped to the JobSet of the same name, foreign ones
// included), the inputs of minResources and of the defaults: LimitRanges (the namespace's JobSets),
// RuntimeClasses and WorkloadPolicies (every JobSet), and the JobSets' pods (created, deleted, no
// longer active, or resized in place: podChanges; batched per JobSet over PodEventBatch:
// podEvents), since a gang's price follows the pods that exist (PriceFollowingPods). Pods are read
// from the manager's cache (shared with the PodGroup status controller), indexed by their JobSet.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := CheckRegistry(); err != nil {
		return err
	}
	registerMetrics()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podJobSetIndex, indexPodJobSet); err != nil {
		return fmt.Errorf("indexing pods by JobSet: %w", err)
	}
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&jobsetv1alpha2.JobSet{}).
		Watches(&schedulingv1beta1.PodGroup{}, byName).
		Watches(&corev1.Pod{}, podEvents, builder.WithPredicates(podChanges)).
		Watches(&corev1.LimitRange{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.jobSets(ctx, client.InNamespace(o.GetNamespace()))
		})).
		Watches(&nodev1.RuntimeClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return r.jobSets(ctx)
		})).
		Watches(&hbv1.WorkloadPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return r.jobSets(ctx)
		})).
		Complete(r)
}

func (r *Reconciler) jobSets(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list jobsetv1alpha2.JobSetList
	if err := r.client.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		log.FromContext(ctx).Error(err, "listing JobSets to recompute their PodGroups")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile brings the JobSet's PodGroup to what it should be: absent (not a gang, suspended,
// finished), left alone (foreign), or applied when it differs.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx).WithValues("jobset", req.NamespacedName)
	var js jobsetv1alpha2.JobSet
	if err := r.client.Get(ctx, req.NamespacedName, &js); err != nil {
		if apierrors.IsNotFound(err) {
			// The garbage collector deletes our PodGroup through its ownerReference.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading JobSet %s: %w", req.NamespacedName, err)
	}
	if !js.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	var have *schedulingv1beta1.PodGroup
	var pg schedulingv1beta1.PodGroup
	if err := r.client.Get(ctx, req.NamespacedName, &pg); err == nil {
		have = &pg
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading PodGroup %s: %w", req.NamespacedName, err)
	}
	// A TrainJob's JobSet takes its sub-group annotations from the TrainJob (Trainer does not copy the
	// TrainJob's metadata onto it).
	var tj *unstructured.Unstructured
	if defaults.TrainJobOwned(&js) {
		var err error
		if tj, err = r.trainJobOf(ctx, &js); err != nil {
			return reconcile.Result{}, err
		}
	}
	if have != nil && !metav1.IsControlledBy(have, &js) {
		if trainerPodGroup(&js, have) {
			r.reportPhase(&js, have)
			if err := r.subGroupTrainerPodGroup(ctx, &js, tj, have); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{}, r.priceTrainerPodGroup(ctx, &js, have)
		}
		r.warnForeign(&js, have)
		return reconcile.Result{}, nil
	}
	if have != nil {
		r.reportPhase(&js, have)
	}
	if have == nil && tj != nil {
		// Trainer writes a TrainJob's JobSet and its PodGroup in no fixed order: a PodGroup of ours
		// made first would take the name of the one Trainer is about to apply.
		mine, err := r.trainerMakesPodGroup(ctx, tj)
		if err != nil || mine {
			return reconcile.Result{}, err
		}
	}

	inputs, err := policyinputs.Read(ctx, r.client, js.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	ns, pols := inputs.Namespace, inputs.Policies
	switch {
	case !IsGang(&js, ns, pols):
		if feature := defaults.JobSetGangBlocked(&js, ns, pols); feature != "" {
			r.reportStaged(&js, feature)
			return reconcile.Result{}, r.release(ctx, &js, have, "not a gang: "+feature)
		}
		return reconcile.Result{}, r.release(ctx, &js, have, "not a gang")
	case Suspended(&js):
		return reconcile.Result{}, r.release(ctx, &js, have, "suspended")
	case Finished(&js):
		return reconcile.Result{}, r.release(ctx, &js, have, "finished")
	}

	adm, err := r.admission(ctx, js.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	shaped := &js
	if tj != nil {
		if _, err := trainJobSubGroups(&js, tj); err != nil {
			r.invalidTrainJobGang(&js, tj, "no PodGroup: "+err.Error())
			return reconcile.Result{}, nil //nolint:nilerr // bad input (the Events name the annotation and the fix): a retry cannot help
		}
		shaped = withSubGroupAnnotations(&js, tj)
	}
	want, skips, err := Desired(shaped, ns, pols, adm)
	if err != nil {
		// Bad input: the user must fix the JobSet; a retry cannot help. The message names the field.
		r.recorder.Event(&js, corev1.EventTypeWarning, ReasonInvalidGang, "no PodGroup: "+err.Error())
		logger.Info("JobSet cannot be a gang", "error", err.Error())
		return reconcile.Result{}, nil
	}
	if have == nil || have.Spec.Queue != want.Spec.Queue {
		// The same allowedQueues check as the JobSet webhook's, for namespaces the webhooks skip:
		// no PodGroup in a queue the namespace's policy does not allow. A queue already in use is
		// not judged again, so tightening a policy never breaks a running gang.
		if ref := defaults.QueueRefusal(want.Spec.Queue, ns, pols); ref != nil {
			r.recorder.Event(&js, corev1.EventTypeWarning, ReasonQueueNotAllowed, "no PodGroup: "+ref.Error())
			logger.Info("PodGroup queue not allowed", "reason", ref.Error())
			return reconcile.Result{}, nil
		}
	}
	// The price follows the gang's pods that exist (PriceFollowingPods): they keep the requests they
	// were admitted with, whatever the LimitRange and RuntimeClass say now.
	price, err := r.followPods(ctx, &js, adm)
	if err != nil {
		return reconcile.Result{}, err
	}
	if price.FollowsOldInputs() {
		want.Spec.MinResources = resourcesPtr(price.MinResources)
		r.reportKept(&js, want.Name, have, price)
	}
	if have != nil && UpToDate(want, have) {
		return reconcile.Result{}, nil
	}
	if err := r.apply(ctx, want); err != nil {
		writes.WithLabelValues("apply", "error").Inc()
		return reconcile.Result{}, err
	}
	// Said when the PodGroup is written, not on every resync: a default left out because it would
	// contradict the JobSet (a tier bound on pods pinned to nodes).
	for _, sk := range skips {
		r.recorder.Event(&js, corev1.EventTypeWarning, ReasonDefaultSkipped, "PodGroup "+want.Name+": "+sk.String())
	}
	writes.WithLabelValues("apply", "ok").Inc()
	logger.V(1).Info("applied PodGroup", "minMember", want.Spec.MinMember, "queue", want.Spec.Queue)
	return reconcile.Result{}, nil
}

// apply writes the desired fields with server-side apply. The body holds only our fields (no status,
// no creationTimestamp), so forcing ownership takes over only those.
func (r *Reconciler) apply(ctx context.Context, want *schedulingv1beta1.PodGroup) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return fmt.Errorf("encoding PodGroup %s/%s: %w", want.Namespace, want.Name, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	u := &unstructured.Unstructured{Object: m}
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying PodGroup %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// release deletes the JobSet's own PodGroup, with a UID precondition so a PodGroup made again in the
// meantime is never deleted by mistake.
func (r *Reconciler) release(ctx context.Context, js *jobsetv1alpha2.JobSet, have *schedulingv1beta1.PodGroup, why string) error {
	if have == nil || !have.DeletionTimestamp.IsZero() {
		return nil
	}
	uid := have.UID
	err := r.client.Delete(ctx, have, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		writes.WithLabelValues("delete", "error").Inc()
		return fmt.Errorf("deleting PodGroup %s/%s (%s): %w", have.Namespace, have.Name, why, err)
	}
	writes.WithLabelValues("delete", "ok").Inc()
	r.recorder.Eventf(js, corev1.EventTypeNormal, ReasonPodGroupReleased, "deleted PodGroup %s: JobSet %s", have.Name, why)
	log.FromContext(ctx).Info("released PodGroup", "jobset", client.ObjectKeyFromObject(js), "reason", why)
	return nil
}

// warnForeign sends one Warning per foreign PodGroup: a PodGroup of the JobSet's name that this
// JobSet does not control is never adopted or written.
func (r *Reconciler) warnForeign(js *jobsetv1alpha2.JobSet, pg *schedulingv1beta1.PodGroup) {
	r.mu.Lock()
	seen := r.warned[js.UID] == pg.UID
	r.warned[js.UID] = pg.UID
	r.mu.Unlock()
	if seen {
		return
	}
	foreign.Inc()
	r.recorder.Eventf(js, corev1.EventTypeWarning, ReasonForeignPodGroup,
		"PodGroup %s/%s exists and is not controlled by this JobSet: it is not adopted or changed; delete it or rename the JobSet to get a gang",
		pg.Namespace, pg.Name)
}

// reportPhase sends an Event when the PodGroup's phase differs from the one last reported, with the
// Unschedulable condition's message when there is one.
func (r *Reconciler) reportPhase(js *jobsetv1alpha2.JobSet, pg *schedulingv1beta1.PodGroup) {
	phase := pg.Status.Phase
	if phase == "" {
		return
	}
	r.mu.Lock()
	same := r.phases[js.UID] == phase
	r.phases[js.UID] = phase
	r.mu.Unlock()
	if same {
		return
	}
	msg := fmt.Sprintf("PodGroup %s is %s", pg.Name, phase)
	typ := corev1.EventTypeNormal
	for _, c := range pg.Status.Conditions {
		if c.Type == schedulingv1beta1.PodGroupUnschedulableType && c.Status == corev1.ConditionTrue {
			msg += ": unschedulable: " + c.Message
			typ = corev1.EventTypeWarning
		}
	}
	r.recorder.Event(js, typ, ReasonPodGroupPrefix+string(phase), msg)
}

// reportStaged sends one GangNotPossible Warning per JobSet and feature (per process).
func (r *Reconciler) reportStaged(js *jobsetv1alpha2.JobSet, feature string) {
	r.mu.Lock()
	same := r.staged[js.UID] == feature
	r.staged[js.UID] = feature
	r.mu.Unlock()
	if same {
		return
	}
	r.recorder.Eventf(js, corev1.EventTypeWarning, ReasonGangNotPossible,
		"no PodGroup: JobSet creates this JobSet's pods in stages (%s), so a gang of all of them could never start; its pods are scheduled without a gang. Remove the feature to get a gang, or set annotation %s: \"false\" to say that no gang is wanted",
		feature, hbv1.GangAnnotation)
}

// followPods prices the gang from its pods in the manager's cache (PriceFollowingPods).
func (r *Reconciler) followPods(ctx context.Context, js *jobsetv1alpha2.JobSet, adm Admission) (Price, error) {
	pods, err := r.gangPods(ctx, js)
	if err != nil {
		return Price{}, err
	}
	price, err := PriceFollowingPods(js, adm, pods)
	if err != nil {
		return Price{}, fmt.Errorf("pricing the pods of JobSet %s/%s: %w", js.Namespace, js.Name, err)
	}
	return price, nil
}

// resourcesPtr is l as a PodGroup's spec.minResources (nil when empty).
func resourcesPtr(l corev1.ResourceList) *corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	return &l
}

// reportKept sends one MinResourcesKept Event per pair of prices (per process): the PodGroup's
// minResources follows existing pods admitted with other LimitRange defaults or RuntimeClass
// overhead than the current ones.
func (r *Reconciler) reportKept(js *jobsetv1alpha2.JobSet, pgName string, have *schedulingv1beta1.PodGroup, p Price) {
	got, inputs := formatResources(resourcesPtr(p.MinResources)), formatResources(resourcesPtr(p.FromInputs))
	key := got + " " + inputs
	r.mu.Lock()
	same := r.kept[js.UID] == key
	r.kept[js.UID] = key
	r.mu.Unlock()
	if same {
		return
	}
	verb := "gets"
	if have != nil && sameResources(have.Spec.MinResources, resourcesPtr(p.MinResources)) {
		verb = "keeps"
	}
	missing := ""
	if p.Missing > 0 {
		missing = fmt.Sprintf(", and the current inputs' request for the %d not created yet", p.Missing)
	}
	r.recorder.Eventf(js, corev1.EventTypeNormal, ReasonMinResourcesKept,
		"PodGroup %s %s minResources %s: the requests of its %d existing pods%s; %d of those pods were admitted with the LimitRange defaults and RuntimeClass overhead of their creation and keep them. The current ones would give %s, which applies to pods created from now on, in full after the JobSet is suspended and resumed",
		pgName, verb, got, p.Existing, missing, p.Differing, inputs)
}

// admission reads the namespace's LimitRanges and the RuntimeClasses.
func (r *Reconciler) admission(ctx context.Context, namespace string) (Admission, error) {
	var lrs corev1.LimitRangeList
	if err := r.client.List(ctx, &lrs, client.InNamespace(namespace)); err != nil {
		return Admission{}, fmt.Errorf("listing LimitRanges of %s: %w", namespace, err)
	}
	var rcs nodev1.RuntimeClassList
	if err := r.client.List(ctx, &rcs); err != nil {
		return Admission{}, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	a := Admission{LimitRanges: lrs.Items, RuntimeClasses: make(map[string]*nodev1.RuntimeClass, len(rcs.Items))}
	for i := range rcs.Items {
		a.RuntimeClasses[rcs.Items[i].Name] = &rcs.Items[i]
	}
	return a, nil
}
