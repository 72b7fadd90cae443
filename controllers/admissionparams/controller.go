// Package admissionparams keeps, in every namespace whose Pods hyperbatch admits, the param
// ConfigMap of the admission policies (internal/admissionpolicy): what the defaults engine decides
// for that namespace under the current WorkloadPolicies, Namespace and PriorityClasses. The
// apiserver's policies read it for every request of the namespace, so while the manager is down
// admission goes on with the last params written.
//
// A namespace labelled hyperbatch.dev/pod-webhook=enabled (and not excluded) gets the ConfigMap; any
// other namespace loses one the controller wrote. A ConfigMap edited or deleted by hand is written
// again.
package admissionparams

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/enqueue"
	"github.com/hyperbatch/hyperbatch/internal/policyinputs"
)

// ControllerName names the controller (its logs and metrics).
const ControllerName = "admissionparams"

// RBAC of this controller (config/rbac is generated from these markers).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch

var paramsWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "hyperbatch_admission_params_writes_total",
	Help: "Writes of the admission policies' param ConfigMaps, by result (created, updated, deleted, error).",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(paramsWrites) }

// Reconciler writes one namespace's param ConfigMap.
type Reconciler struct {
	client   client.Client
	excluded map[string]bool
}

// NewReconciler builds a Reconciler; excluded namespaces never get params (kube-system always).
func NewReconciler(mgr ctrl.Manager, excluded ...string) *Reconciler {
	r := &Reconciler{client: mgr.GetClient(), excluded: map[string]bool{metav1.NamespaceSystem: true}}
	for _, n := range excluded {
		if n != "" {
			r.excluded[n] = true
		}
	}
	return r
}

// SetupWithManager watches namespaces, the param ConfigMaps, and the policies and PriorityClasses
// (any of which can change every namespace's params).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueue.All(r.client, func() client.ObjectList { return &corev1.NamespaceList{} })
	params := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == admissionpolicy.ParamsName && o.GetLabels()[admissionpolicy.ParamsLabel] == "true"
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Namespace{}).
		Watches(&hbv1.WorkloadPolicy{}, all).
		Watches(&schedulingv1.PriorityClass{}, all).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), builder.WithPredicates(params)).
		Complete(r)
}

// Reconcile writes or removes the params of one namespace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ns corev1.Namespace
	if err := r.client.Get(ctx, req.NamespacedName, &ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var have corev1.ConfigMap
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: admissionpolicy.ParamsName}, &have)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading the admission params of namespace %s: %w", ns.Name, err)
	}
	if exists && have.Labels[admissionpolicy.ParamsLabel] != "true" {
		// Not ours: a ConfigMap of that name the namespace's owner made. The policies would read it,
		// so say so; never overwrite it.
		log.FromContext(ctx).Info("a ConfigMap not written by hyperbatch has the admission params' name; the namespace's Pods are admitted with it",
			"namespace", ns.Name, "configMap", admissionpolicy.ParamsName)
		return ctrl.Result{}, nil
	}
	governed := !r.excluded[ns.Name] && ns.DeletionTimestamp.IsZero() && ns.Labels[hbv1.PodWebhookLabel] == hbv1.PodWebhookLabelEnabled
	if !governed {
		if !exists || !ns.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil
		}
		if err := r.client.Delete(ctx, &have); client.IgnoreNotFound(err) != nil {
			paramsWrites.WithLabelValues("error").Inc()
			return ctrl.Result{}, fmt.Errorf("deleting the admission params of namespace %s: %w", ns.Name, err)
		}
		paramsWrites.WithLabelValues("deleted").Inc()
		return ctrl.Result{}, nil
	}
	in, err := policyinputs.Read(ctx, r.client, ns.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	data, err := admissionpolicy.Params(in.Namespace, in.Policies, func(name string) (*schedulingv1.PriorityClass, error) {
		var pc schedulingv1.PriorityClass
		if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &pc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return &pc, nil
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("computing the admission params of namespace %s: %w", ns.Name, err)
	}
	want := admissionpolicy.ParamsObject(ns.Name, data)
	if !exists {
		err := r.client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			// The manager's cache holds only labelled ConfigMaps (ParamsLabel): this one is not ours.
			log.FromContext(ctx).Info("a ConfigMap not written by hyperbatch has the admission params' name; the namespace's Pods are admitted with it",
				"namespace", ns.Name, "configMap", admissionpolicy.ParamsName)
			return ctrl.Result{}, nil
		}
		if err != nil {
			paramsWrites.WithLabelValues("error").Inc()
			return ctrl.Result{}, fmt.Errorf("creating the admission params of namespace %s: %w", ns.Name, err)
		}
		paramsWrites.WithLabelValues("created").Inc()
		log.FromContext(ctx).V(1).Info("admission params written", "namespace", ns.Name, "policy", data[admissionpolicy.KeyPolicy])
		return ctrl.Result{}, nil
	}
	if maps.Equal(have.Data, want.Data) && maps.Equal(have.Labels, want.Labels) && len(have.BinaryData) == 0 {
		return ctrl.Result{}, nil
	}
	have.Data, have.Labels, have.BinaryData = want.Data, want.Labels, nil
	if err := r.client.Update(ctx, &have); err != nil {
		paramsWrites.WithLabelValues("error").Inc()
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return ctrl.Result{}, fmt.Errorf("updating the admission params of namespace %s: %w", ns.Name, err)
	}
	paramsWrites.WithLabelValues("updated").Inc()
	log.FromContext(ctx).V(1).Info("admission params updated", "namespace", ns.Name, "policy", data[admissionpolicy.KeyPolicy])
	return ctrl.Result{}, nil
}
