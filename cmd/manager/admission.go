package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// Admission modes (--admission).
const (
	admissionWebhook = "webhook"
	admissionPolicy  = "policy"
	admissionAuto    = "auto"
)

// RBAC of the policy mode (config/rbac is generated from these markers).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings;validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;update;patch;delete

// admissionMode is hyperbatch_admission_mode{mode}: 1 for the mode this manager runs in.
var admissionMode = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "hyperbatch_admission_mode",
	Help: "The admission mode this manager runs in (1 for the mode, 0 for the others): webhook (Pods admitted by hyperbatch's webhooks) or policy (Pods admitted by MutatingAdmissionPolicy and ValidatingAdmissionPolicy inside the apiserver).",
}, []string{"mode"})

func init() { metrics.Registry.MustRegister(admissionMode) }

// resolveAdmission turns --admission into webhook or policy. auto is policy when the apiserver serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, else webhook; policy on an apiserver
// without it is an error naming the fix.
func resolveAdmission(cfg *rest.Config, mode string) (resolved, why string, err error) {
	switch mode {
	case admissionWebhook:
		return admissionWebhook, "--admission=webhook", nil
	case admissionPolicy, admissionAuto:
	default:
		return "", "", fmt.Errorf("--admission %q is not one of webhook, policy, auto", mode)
	}
	served, err := servesMutatingAdmissionPolicy(cfg)
	if err != nil {
		return "", "", fmt.Errorf("--admission=%s: asking the apiserver whether it serves MutatingAdmissionPolicy: %w", mode, err)
	}
	switch {
	case served:
		return admissionPolicy, "the apiserver serves admissionregistration.k8s.io/v1 mutatingadmissionpolicies", nil
	case mode == admissionPolicy:
		return "", "", fmt.Errorf("--admission=policy: the apiserver does not serve admissionregistration.k8s.io/v1 mutatingadmissionpolicies " +
			"(Kubernetes 1.36 or later serves it); use --admission=webhook or auto")
	}
	return admissionWebhook, "the apiserver does not serve admissionregistration.k8s.io/v1 mutatingadmissionpolicies", nil
}

func servesMutatingAdmissionPolicy(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" }), nil
}

// podPolicyKinds are the kinds the admission policies take over from the webhooks in policy mode.
func podPolicyKinds() []defaults.Kind {
	var out []defaults.Kind
	for _, p := range admissionpolicy.Programs() {
		out = append(out, p.Kind)
	}
	return out
}

// webhookKindsFor are the kinds whose webhook configurations are registered in mode: all of kinds
// in webhook mode, without those the policies cover in policy mode.
func webhookKindsFor(mode string, kinds []defaults.Kind) []defaults.Kind {
	if mode != admissionPolicy {
		return kinds
	}
	covered := podPolicyKinds()
	return slices.DeleteFunc(slices.Clone(kinds), func(k defaults.Kind) bool { return slices.Contains(covered, k) })
}

// applyAdmissionPolicies makes the apiserver's generated policies and bindings those of mode: in
// policy mode it applies them (server-side apply, so a newer manager's policies replace an older
// one's), in webhook mode it deletes any a policy-mode manager left.
func applyAdmissionPolicies(ctx context.Context, cfg *rest.Config, mode string, o options) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("creating client for admission policies: %w", err)
	}
	opts := admissionpolicy.Options{Excluded: o.excluded, NoWarnings: !o.admissionWarnings}
	if mode == admissionPolicy {
		me, err := whoAmI(ctx, cfg)
		if err != nil {
			return err
		}
		opts.ParamsWriters = []string{me}
	}
	objs := admissionpolicy.Objects(opts)
	if mode == admissionPolicy {
		for _, obj := range objs {
			//nolint:staticcheck // client.Apply with a typed object is the simplest server-side apply here.
			if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("hyperbatch-manager"), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
			}
		}
		if opts.NoWarnings {
			// --admission-warnings=false on a cluster an earlier manager gave the Warn policies.
			for _, obj := range admissionpolicy.WarnObjects() {
				if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting %s %s (--admission-warnings=false): %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
				}
			}
		}
		return nil
	}
	served, err := servesMutatingAdmissionPolicy(cfg)
	if err != nil || !served {
		return nil //nolint:nilerr // nothing to clean up where the API is not served
	}
	// A policy-mode manager's guard of the params too (its writer does not matter for the names).
	objs = admissionpolicy.Objects(admissionpolicy.Options{Excluded: o.excluded, ParamsWriters: []string{"-"}})
	// Bindings first, so no binding is left pointing at a deleted policy.
	// Not fatal: webhook mode works whatever is left, and a manager without the RBAC to delete
	// them (installed before policy mode existed) must still start.
	for i := len(objs) - 1; i >= 0; i-- {
		if err := c.Delete(ctx, objs[i]); client.IgnoreNotFound(err) != nil {
			ctrl.Log.Error(err, "could not delete an admission policy object left by policy mode; delete it by hand",
				"kind", objs[i].GetObjectKind().GroupVersionKind().Kind, "name", objs[i].GetName())
		}
	}
	return nil
}

// whoAmI is the manager's own user name (a SelfSubjectReview): the one writer the params guard lets
// through.
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("--admission=policy: finding the manager's own user name (SelfSubjectReview) for the params guard: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// setAdmissionMode records the mode in the metric and the log.
func setAdmissionMode(mode, why string) {
	for _, m := range []string{admissionWebhook, admissionPolicy} {
		v := 0.0
		if m == mode {
			v = 1
		}
		admissionMode.WithLabelValues(m).Set(v)
	}
	kinds := make([]string, 0)
	if mode == admissionPolicy {
		for _, k := range podPolicyKinds() {
			kinds = append(kinds, string(k))
		}
	}
	ctrl.Log.Info("admission mode", "mode", mode, "reason", why, "policyKinds", strings.Join(kinds, ","))
}
