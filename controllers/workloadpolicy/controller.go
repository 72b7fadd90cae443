// Package workloadpolicy keeps the status of WorkloadPolicy objects: how many namespaces each one
// governs now, whether it is valid (Ready: its namespaceSelector parses and its PriorityClass
// exists), whether the Volcano Queues it names exist (QueuesExist), and whether another policy of the
// same weight wins some of its namespaces (WeightTie).
package workloadpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/enqueue"
)

// ConditionReady is the status condition saying the policy is valid and in force.
const ConditionReady = hbv1.PolicyConditionReady

// Reasons of ConditionReady.
const (
	ReasonValid                    = "Valid"
	ReasonInvalidNamespaceSelector = "InvalidNamespaceSelector"
	// ReasonPriorityClassNotFound: the policy's default priorityClassName names no PriorityClass; the
	// policy governs and fills its other defaults, but not that one (internal/defaults).
	ReasonPriorityClassNotFound = hbv1.PolicyReasonPriorityClassNotFound
)

// ConditionWeightTie is True while a policy of the same weight wins some of this policy's namespaces.
const ConditionWeightTie = hbv1.PolicyConditionWeightTie

// Reasons of ConditionWeightTie.
const (
	ReasonLosesTie = "LosesTieByName"
	ReasonNoTie    = "NoTie"
)

const (
	// ControllerName names the controller (its logs and metrics).
	ControllerName = "workloadpolicy"
	// EventSource is the source component of the Events it records.
	EventSource = "hyperbatch-workloadpolicy"
)

// RBAC of this controller (config/rbac is generated from these markers; test/chart checks the chart
// grants exactly that).
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch

// Reconciler updates WorkloadPolicy status.
type Reconciler struct {
	client   client.Client
	recorder record.EventRecorder
}

// NewReconciler builds a Reconciler from the manager's cached client.
func NewReconciler(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorderFor(EventSource)}
}

// SetupWithManager watches policies, and namespaces because a namespace's labels decide which
// policies govern it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&hbv1.WorkloadPolicy{}).
		Watches(&corev1.Namespace{}, enqueue.All(r.client, func() client.ObjectList { return &hbv1.WorkloadPolicyList{} })).
		// A policy created, deleted, reweighted or reselected changes the WeightTie condition of the
		// others; its status writes do not.
		Watches(&hbv1.WorkloadPolicy{}, enqueue.All(r.client, func() client.ObjectList { return &hbv1.WorkloadPolicyList{} }),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A PriorityClass created or deleted changes the Ready condition of the policies naming it.
		Watches(&schedulingv1.PriorityClass{}, enqueue.All(r.client, func() client.ObjectList { return &hbv1.WorkloadPolicyList{} }),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// A Queue created or deleted changes the QueuesExist condition of the policies naming it;
		// its updates (Volcano writes Queue status often) do not.
		Watches(&schedulingv1beta1.Queue{}, enqueue.All(r.client, func() client.ObjectList { return &hbv1.WorkloadPolicyList{} }),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Complete(r)
}

// Reconcile recomputes one policy's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p hbv1.WorkloadPolicy
	if err := r.client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation

	sel, selErr := defaults.NamespaceSelector(&p)
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "policy is valid and governs the namespaces its selector matches", ObservedGeneration: p.Generation}
	var matched []corev1.Namespace
	if selErr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalidNamespaceSelector, selErr.Error()+failClosedNote(&p)
		status.MatchingNamespaces = 0
	} else {
		var nss corev1.NamespaceList
		if err := r.client.List(ctx, &nss); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing namespaces: %w", err)
		}
		for i := range nss.Items {
			if sel.Matches(labels.Set(nss.Items[i].Labels)) {
				matched = append(matched, nss.Items[i])
			}
		}
		status.MatchingNamespaces = int32(len(matched))
		pcCond, err := r.priorityClassCondition(ctx, &p)
		if err != nil {
			return ctrl.Result{}, err
		}
		if pcCond != nil {
			cond = *pcCond
		}
	}
	qcond, err := r.queuesCondition(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}
	tcond, err := r.tieCondition(ctx, &p, matched)
	if err != nil {
		return ctrl.Result{}, err
	}
	qchanged := apimeta.SetStatusCondition(&status.Conditions, qcond)
	tchanged := apimeta.SetStatusCondition(&status.Conditions, tcond)
	changed := apimeta.SetStatusCondition(&status.Conditions, cond)
	if qchanged && qcond.Status == metav1.ConditionFalse {
		r.recorder.Event(&p, corev1.EventTypeWarning, qcond.Reason, qcond.Message)
	}
	if tchanged && tcond.Status == metav1.ConditionTrue {
		r.recorder.Event(&p, corev1.EventTypeWarning, tcond.Reason, tcond.Message)
	}
	changed = changed || qchanged || tchanged
	if !changed && status.MatchingNamespaces == p.Status.MatchingNamespaces && status.ObservedGeneration == p.Status.ObservedGeneration {
		return ctrl.Result{}, nil
	}
	if changed && cond.Status == metav1.ConditionFalse {
		r.recorder.Event(&p, corev1.EventTypeWarning, cond.Reason, cond.Message)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Status = *status
	if err := r.client.Status().Patch(ctx, &p, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of WorkloadPolicy %s: %w", p.Name, err)
	}
	return ctrl.Result{}, nil
}

// failClosedNote says what an invalid policy still does: its defaults apply nowhere, but its allowed
// lists fail closed (internal/defaults, QueueRefusal and ClusterRefusal).
func failClosedNote(p *hbv1.WorkloadPolicy) string {
	if len(p.Spec.AllowedQueues) == 0 && len(p.Spec.AllowedClusters) == 0 {
		return "; until it is fixed, its defaults apply to no namespace"
	}
	return "; until it is fixed, its defaults apply to no namespace, and its allowedQueues and allowedClusters apply " +
		"to every namespace not governed by a valid policy ranked above it (a higher weight, or the same weight and a smaller name): they fail closed"
}
