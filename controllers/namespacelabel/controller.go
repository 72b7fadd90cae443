// Package namespacelabel labels every namespace with whether a WorkloadPolicy governs it, for the
// webhooks' namespaceSelectors (a label selector cannot say "namespaces some policy governs").
//
//   - hyperbatch.dev/pod-webhook=enabled on a governed namespace: the Pod webhooks admit only
//     namespaces with it, so ungoverned Pods never reach hyperbatch.
//   - hyperbatch.dev/pod-webhook=disabled on a namespace no policy governs: the workload webhooks
//     skip those, so a hyperbatch outage never blocks workloads no policy governs. A namespace not
//     labelled yet (just created, or while the manager is down) still reaches the workload
//     webhooks, which fail closed: a governed namespace is never left unguarded. While any policy
//     has an invalid selector (it could govern any namespace) no namespace is marked disabled.
//
// The controller changes only labels it set itself (marked by the annotation
// hyperbatch.dev/pod-webhook-managed), so a label an administrator set by hand, either value, is
// never touched. Excluded namespaces (kube-system, hyperbatch's own, --excluded-namespaces) get no
// label, and lose one the controller set: no webhook admits objects there.
package namespacelabel

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/enqueue"
)

const (
	// ControllerName names the controller (its logs and metrics).
	ControllerName = "namespacelabel"
	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-namespacelabel"
	// ReasonPodWebhookEnabled is the Event reason when a WorkloadPolicy starts governing the namespace.
	ReasonPodWebhookEnabled = "PodWebhookEnabled"
	// ReasonPodWebhookDisabled is the Event reason when no WorkloadPolicy governs the namespace any more.
	ReasonPodWebhookDisabled = "PodWebhookDisabled"
)

// RBAC of this controller (config/rbac is generated from these markers).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps the pod-webhook label of one namespace in line with the policies.
type Reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	// excluded are namespaces never labelled (kube-system, hyperbatch's own, the configured
	// exclusions): no webhook admits objects there.
	excluded map[string]bool
}

// NewReconciler builds a Reconciler. excluded are the namespaces no webhook admits objects in:
// hyperbatch's own and any others (--excluded-namespaces); kube-system always is.
func NewReconciler(mgr ctrl.Manager, excluded ...string) *Reconciler {
	r := &Reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor(EventSource),
		excluded: map[string]bool{metav1.NamespaceSystem: true}}
	for _, n := range excluded {
		if n != "" {
			r.excluded[n] = true
		}
	}
	return r
}

// SetupWithManager watches namespaces, and policies because a policy change can govern any namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Namespace{}).
		Watches(&hbv1.WorkloadPolicy{}, enqueue.All(r.client, func() client.ObjectList { return &corev1.NamespaceList{} })).
		Complete(r)
}

// Reconcile adds or removes the label of one namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, req.NamespacedName, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var list hbv1.WorkloadPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing WorkloadPolicies: %w", err)
	}
	// A policy with an invalid selector matches nothing here (the workloadpolicy controller reports
	// it), but it might be meant to govern any namespace: while one exists, no namespace is marked
	// ungoverned, so the workload webhooks still see them all.
	pols, invalid := defaults.NewPolicies(list.Items)
	governing := pols.MatchNamespace(defaults.NamespaceOf(&ns))
	want := ""
	switch {
	case r.excluded[ns.Name]:
	case governing != nil:
		want = hbv1.PodWebhookLabelEnabled
	case invalid == nil:
		want = hbv1.PodWebhookLabelDisabled
	}
	have, labelled := ns.Labels[hbv1.PodWebhookLabel]
	managed := ns.Annotations[hbv1.PodWebhookManagedAnnotation] == "true"
	// A label set by hand is the administrator's: kept, whatever its value. The one exception is the
	// opt-in of a governed namespace, which was always set (and marked managed) over another value.
	handSet := labelled && !managed && (have == hbv1.PodWebhookLabelEnabled || have == hbv1.PodWebhookLabelDisabled || want != hbv1.PodWebhookLabelEnabled)
	if have == want && (managed || !labelled) || handSet {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if want == "" {
		delete(ns.Labels, hbv1.PodWebhookLabel)
		delete(ns.Annotations, hbv1.PodWebhookManagedAnnotation)
	} else {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Labels[hbv1.PodWebhookLabel] = want
		ns.Annotations[hbv1.PodWebhookManagedAnnotation] = "true"
	}
	if err := r.client.Patch(ctx, &ns, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("setting the label %s=%q on namespace %s: %w", hbv1.PodWebhookLabel, want, ns.Name, err)
	}
	switch want {
	case hbv1.PodWebhookLabelEnabled:
		r.recorder.Eventf(&ns, corev1.EventTypeNormal, ReasonPodWebhookEnabled, "WorkloadPolicy %s governs this namespace: its Pods now get hyperbatch defaults", governing.Name)
	case hbv1.PodWebhookLabelDisabled:
		if have == hbv1.PodWebhookLabelEnabled {
			r.recorder.Event(&ns, corev1.EventTypeNormal, ReasonPodWebhookDisabled, "no WorkloadPolicy governs this namespace any more")
		}
	}
	lg := log.FromContext(ctx)
	if want != hbv1.PodWebhookLabelEnabled && have != hbv1.PodWebhookLabelEnabled {
		lg = lg.V(1) // every ungoverned namespace once: not news
	}
	lg.Info("namespace webhook label set", "namespace", ns.Name, "label", want, "was", have)
	return ctrl.Result{}, nil
}
