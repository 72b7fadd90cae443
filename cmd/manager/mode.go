package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/karmadainterpreter"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// The manager's modes: one binary, three places.
const (
	// modeStandalone is one cluster that runs the workloads and may split HyperJobs itself (Karmada's
	// policy CRDs installed): every controller and webhook.
	modeStandalone = "standalone"
	// modeMember is a member cluster of a Karmada control plane: it runs the workloads Karmada
	// propagates; HyperJobs are split on the control plane, so neither the HyperJob controller nor
	// the HyperJob and PropagationPolicy webhooks run here (planeOnlyControllers and planeOnlyKinds are left out).
	modeMember = "member"
	// modeControlPlane is a Karmada control plane (--kubeconfig points at the Karmada apiserver):
	// HyperJobs are split there and Karmada propagates the children. No pod runs there, so only the
	// controllers and webhooks of controlPlaneControllers and controlPlaneKinds make sense.
	modeControlPlane = "control-plane"
)

// planeOnlyControllers and planeOnlyKinds belong to the control plane, not to a member.
var (
	planeOnlyControllers = []string{"hyperjob"}
	planeOnlyKinds       = []webhook.Kind{defaults.KindHyperJob, defaults.KindPropagationPolicy}
)

// controlPlaneControllers run on a Karmada control plane: the HyperJob split, HyperJob deadlines and
// TTL, and WorkloadPolicy status (a HyperJob's defaults come from its namespace's policies there).
var controlPlaneControllers = []string{"hyperjob", "lifecycle", "workloadpolicy"}

// controlPlaneKinds are the kinds whose webhooks a control plane can serve; the first three are its
// default (the objects a user or the HyperJob controller writes there).
var controlPlaneKinds = []webhook.Kind{defaults.KindHyperJob, defaults.KindVolcanoJob, defaults.KindPropagationPolicy, defaults.KindWorkloadPolicy}

const controlPlaneDefaultKinds = "HyperJob,VolcanoJob,PropagationPolicy"

// karmadaAPIs are what a control-plane manager needs the apiserver to serve: Karmada's policies and
// bindings (the HyperJob controller writes PropagationPolicies and watches ResourceBindings).
var karmadaAPIs = []struct{ groupVersion, resource string }{
	{"policy.karmada.io/v1alpha1", "propagationpolicies"},
	{"work.karmada.io/v1alpha2", "resourcebindings"},
}

// applyMode checks --mode and, for a control plane, fills in the controllers and webhook kinds the
// user did not set (explicit names the flags set) and refuses those that need pods.
func applyMode(o *options, explicit map[string]bool) error {
	switch o.mode {
	case modeStandalone:
		return nil
	case modeMember:
		return applyMemberMode(o, explicit)
	case modeControlPlane:
	default:
		return fmt.Errorf("--mode %q is not one of %s (one cluster), %s (a Karmada member cluster) or %s (a Karmada control plane)", o.mode, modeStandalone, modeMember, modeControlPlane)
	}
	if !explicit["controllers"] {
		o.controllers = strings.Join(controlPlaneControllers, ",")
	}
	names, err := selectedControllers(o.controllers)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !slices.Contains(controlPlaneControllers, n) {
			return fmt.Errorf("--controllers: controller %q does not run on a Karmada control plane (no pod, PodGroup or node exists there); with --mode=%s choose among %s",
				n, modeControlPlane, strings.Join(controlPlaneControllers, ","))
		}
	}
	if !explicit["webhook-kinds"] {
		o.webhookKinds = controlPlaneDefaultKinds
	}
	kinds, err := selectedWebhookKinds(o.webhookKinds)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if !slices.Contains(controlPlaneKinds, k) {
			var valid []string
			for _, c := range controlPlaneKinds {
				valid = append(valid, string(c))
			}
			return fmt.Errorf("--webhook-kinds: kind %s is not admitted on a Karmada control plane (--mode=%s); choose among %s", k, modeControlPlane, strings.Join(valid, ","))
		}
	}
	return nil
}

// applyMemberMode leaves out, unless given, and refuses, when given, what belongs to the control
// plane.
func applyMemberMode(o *options, explicit map[string]bool) error {
	names, err := selectedControllers(o.controllers)
	if err != nil {
		return err
	}
	var keep []string
	for _, n := range names {
		if !slices.Contains(planeOnlyControllers, n) {
			keep = append(keep, n)
			continue
		}
		if explicit["controllers"] {
			return fmt.Errorf("--controllers: controller %q runs on the Karmada control plane (--mode=%s), not in a member cluster (--mode=%s): HyperJobs are split there", n, modeControlPlane, modeMember)
		}
	}
	o.controllers = strings.Join(keep, ",")
	kinds, err := selectedWebhookKinds(o.webhookKinds)
	if err != nil {
		return err
	}
	var keepKinds []string
	for _, k := range kinds {
		if !slices.Contains(planeOnlyKinds, k) {
			keepKinds = append(keepKinds, string(k))
			continue
		}
		if explicit["webhook-kinds"] {
			return fmt.Errorf("--webhook-kinds: kind %s is admitted on the Karmada control plane (--mode=%s), not in a member cluster (--mode=%s)", k, modeControlPlane, modeMember)
		}
	}
	o.webhookKinds = strings.Join(keepKinds, ",")
	return nil
}

// The retention Karmada applies to Volcano Jobs in the members (internal/karmadainterpreter).
// +kubebuilder:rbac:groups=config.karmada.io,resources=resourceinterpretercustomizations,verbs=list;create;patch

// checkControlPlane verifies that cfg points at a Karmada apiserver and that hyperbatch's own
// namespace exists there (the certificate Secret and the leader-election Lease live in it); it
// creates the namespace when missing. It installs the retention for Volcano Jobs
// (internal/karmadainterpreter), without which Karmada's updates of a member's child are refused
// by Volcano and the child's status stops coming back.
func checkControlPlane(ctx context.Context, cfg *rest.Config, namespace string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--mode=%s: discovery client: %w", modeControlPlane, err)
	}
	for _, api := range karmadaAPIs {
		list, err := dc.ServerResourcesForGroupVersion(api.groupVersion)
		found := false
		if err == nil {
			for _, r := range list.APIResources {
				found = found || r.Name == api.resource
			}
		}
		if !found {
			reason := "not served"
			if err != nil && !apierrors.IsNotFound(err) {
				reason = err.Error()
			}
			return fmt.Errorf("--mode=%s: %s serves no %s %s (%s): point --kubeconfig at the Karmada apiserver (a control plane's manager reads Karmada's kubeconfig, e.g. from the Secret the chart's controlPlane.kubeconfigSecret names)",
				modeControlPlane, cfg.Host, api.groupVersion, api.resource, reason)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--mode=%s: client: %w", modeControlPlane, err)
	}
	if err := ensurePlaneNamespace(ctx, cs, namespace); err != nil {
		return fmt.Errorf("--mode=%s: %w", modeControlPlane, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("--mode=%s: client: %w", modeControlPlane, err)
	}
	other, err := karmadainterpreter.Ensure(ctx, c)
	if err != nil {
		return fmt.Errorf("--mode=%s: %w", modeControlPlane, err)
	}
	if other != "" {
		ctrl.Log.Info("Volcano Jobs already have a retention on this Karmada plane; hyperbatch's is not installed", "resourceInterpreterCustomization", other, "hyperbatch", karmadainterpreter.Name)
	}
	return nil
}

// ensurePlaneNamespace creates hyperbatch's own namespace on the Karmada apiserver, labelled so that
// Karmada does not propagate it: Karmada copies every namespace created on its apiserver into every
// member (its namespace sync controller), and a member's own hyperbatch-system (its manager's,
// created by its installation) then refuses the copy in every member. The namespace holds only
// the control plane's certificate Secret and Lease, which no member needs. A namespace that exists
// without the label gets it.
func ensurePlaneNamespace(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	labels := map[string]string{policyv1alpha1.NamespaceSkipAutoPropagationLabel: "true"}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s on the Karmada apiserver (webhook certificate Secret, leader-election Lease): %w", namespace, err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading namespace %s on the Karmada apiserver: %w", namespace, err)
	}
	if ns.Labels[policyv1alpha1.NamespaceSkipAutoPropagationLabel] == "true" {
		return nil
	}
	patch := []byte(`{"metadata":{"labels":{"` + policyv1alpha1.NamespaceSkipAutoPropagationLabel + `":"true"}}}`)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling namespace %s %s=true on the Karmada apiserver (so Karmada does not copy it into the members): %w", namespace, policyv1alpha1.NamespaceSkipAutoPropagationLabel, err)
	}
	return nil
}
