// Package namespacelabel opts the namespaces that a WorkloadPolicy governs in to the Pod webhooks.
//
// The Pod webhooks only see namespaces labelled hyperbatch.dev/pod-webhook=enabled (a label selector
// cannot say "namespaces some policy governs"), so ungoverned Pods never reach hyperbatch. This
// controller keeps that label on every governed namespace and removes it when no policy governs the
// namespace any more. It removes only labels it set itself (marked by the annotation
// hyperbatch.dev/pod-webhook-managed), so a label an administrator set by hand is never touched.
package namespacelabel

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/enqueue"
)

// RBAC of this controller (config/rbac is generated from these markers).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps the pod-webhook label of one namespace in line with the policies.
type Reconciler struct {
	client   client.Client
	recorder record.EventRecorder
	// excluded are namespaces never labelled (kube-system and hyperbatch's own): no webhook admits
	// objects there.
	excluded map[string]bool
}

// NewReconciler builds a Reconciler; ownNamespace is hyperbatch's namespace.
func NewReconciler(mgr ctrl.Manager, ownNamespace string) *Reconciler {
	return &Reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor("hyperbatch-namespacelabel"),
		excluded: map[string]bool{"kube-system": true, ownNamespace: true}}
}

// SetupWithManager watches namespaces, and policies because a policy change can govern any namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("namespacelabel").
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
	// Policies with invalid selectors are skipped here; the workloadpolicy controller reports them.
	pols, _ := defaults.NewPolicies(list.Items)
	governing := pols.MatchNamespace(defaults.NamespaceOf(&ns))
	want := governing != nil && !r.excluded[ns.Name]

	labelled := ns.Labels[hbv1.PodWebhookLabel] == hbv1.PodWebhookLabelEnabled
	managed := ns.Annotations[hbv1.PodWebhookManagedAnnotation] == "true"
	patch := client.MergeFrom(ns.DeepCopy())
	switch {
	case want && !labelled:
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Labels[hbv1.PodWebhookLabel] = hbv1.PodWebhookLabelEnabled
		ns.Annotations[hbv1.PodWebhookManagedAnnotation] = "true"
		if err := r.client.Patch(ctx, &ns, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("labelling namespace %s for the Pod webhooks: %w", ns.Name, err)
		}
		r.recorder.Eventf(&ns, corev1.EventTypeNormal, "PodWebhookEnabled", "WorkloadPolicy %s governs this namespace: its Pods now get hyperbatch defaults", governing.Name)
		log.FromContext(ctx).Info("namespace opted in to the Pod webhooks", "namespace", ns.Name, "policy", governing.Name)
	case !want && labelled && managed:
		delete(ns.Labels, hbv1.PodWebhookLabel)
		delete(ns.Annotations, hbv1.PodWebhookManagedAnnotation)
		if err := r.client.Patch(ctx, &ns, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("removing the Pod webhook label of namespace %s: %w", ns.Name, err)
		}
		r.recorder.Event(&ns, corev1.EventTypeNormal, "PodWebhookDisabled", "no WorkloadPolicy governs this namespace any more")
		log.FromContext(ctx).Info("namespace opted out of the Pod webhooks", "namespace", ns.Name)
	}
	return ctrl.Result{}, nil
}
