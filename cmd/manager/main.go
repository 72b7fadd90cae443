// Command manager runs hyperbatch's admission webhooks and controllers in one controller-runtime
// manager. Controllers run only on the elected leader; webhooks (and the certificate rotator that
// feeds them) run on every replica.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hyperbatch/hyperbatch/certs"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/webhook"
)

func main() {
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.mode, "mode", modeStandalone, "where the manager runs: "+modeStandalone+" (one cluster: every controller and webhook), "+modeMember+" (a member cluster of a Karmada control plane: everything but the HyperJob controller and the HyperJob and PropagationPolicy webhooks) or "+modeControlPlane+" (a Karmada control plane, --kubeconfig pointing at the Karmada apiserver: the HyperJob, lifecycle and WorkloadPolicy controllers and the HyperJob, VolcanoJob and PropagationPolicy webhooks, registered on the Karmada apiserver). --controllers and --webhook-kinds narrow the mode's set further")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "hyperbatch-system"), "hyperbatch's own namespace: leader-election Lease, webhook certificate Secret and Service; no webhook admits objects there")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus /metrics endpoint binds to; 0 disables it")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address Go's /debug/pprof endpoints bind to, for profiling; empty (the default) turns them off. Bind it to localhost: they are not authenticated")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so only one replica runs the controllers; keep it on in a cluster even with one replica, so the old and new pod of a rolling update never both run them (the Helm chart always sets it)")
	fs.StringVar(&o.controllers, "controllers", "*", "comma-separated controllers to run ('*' for all, '' for none): "+strings.Join(controllerNames(), ","))
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "serve the admission webhooks")
	fs.StringVar(&o.webhookKinds, "webhook-kinds", "*", "comma-separated kinds whose admission webhooks are served (and, with --webhook-url, registered): '*' for all, or some of "+kindNames()+"; a Karmada control plane serves HyperJob,VolcanoJob,PropagationPolicy")
	fs.StringVar(&o.admission, "admission", admissionWebhook, "how Pods are admitted: webhook (hyperbatch's Pod webhooks), policy (MutatingAdmissionPolicy and ValidatingAdmissionPolicy inside the apiserver, with per-namespace params the manager keeps; needs admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, Kubernetes 1.36+), or auto (policy where the apiserver serves it, else webhook). The other kinds keep their webhooks (docs/webhooks.md)")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "address the webhook server binds to (empty: all addresses)")
	fs.BoolVar(&o.admissionWarnings, "admission-warnings", true, "in policy mode, give the admission warnings (\"defaulted ...\", topology skipped) through a ValidatingAdmissionPolicy with a Warn binding; false drops that policy, which costs 105-190 µs of apiserver CPU per Pod (docs/webhooks.md, \"Cost\"); webhook mode always warns")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port the admission webhooks are served on")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/hyperbatch-webhook-certs", "directory of tls.crt and tls.key; written by the rotator in self mode, so it must be writable")
	fs.StringVar(&o.webhookService, "webhook-service-name", "hyperbatch-webhook", "Service in --namespace that fronts the webhook server (names in the serving certificate)")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "URL mode (local clusters): the apiserver calls this base URL, e.g. https://127.0.0.1:9443, and the manager creates the webhook configurations itself; empty means Service mode with configurations installed by the Helm chart")
	fs.StringVar(&o.certMode, "cert-mode", string(certs.ModeSelf), "webhook certificates: self (generate, inject caBundle, rotate), cert-manager (check what cert-manager issued), external (files already in --webhook-cert-dir)")
	fs.DurationVar(&o.certValidity, "cert-validity", certs.DefaultCertValidity, "self mode: lifetime of the serving certificates the manager issues; it renews one when less than 1/3 of its lifetime (or 30 days, at most half of it) is left, and re-issues at once a certificate issued for longer than this (shortening it takes effect at start)")
	fs.StringVar(&o.certSecret, "cert-secret-name", "hyperbatch-webhook-tls", "Secret in --namespace holding the webhook CA and serving certificate")
	fs.StringVar(&o.excludedNamespaces, "excluded-namespaces", "", "comma-separated namespaces no webhook admits objects in and the namespacelabel controller never labels, besides kube-system and --namespace (platform namespaces a catch-all WorkloadPolicy must not touch)")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 0, "client-side rate limit of the manager's requests to the apiserver, in queries per second; 0 keeps the kubeconfig's (controller-runtime: no client-side limit when it sets none), -1 disables it")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0, "burst above --kube-api-qps")
	fs.StringVar(&o.discoveryConfig, "discovery-config", "", "HyperNode discovery configuration file in Volcano's network-topology discovery format (the value of volcano-controller.conf; docs/discovery.md); empty turns discovery off")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	o.explicit = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.explicit[f.Name] = true })

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	if err := run(o); err != nil {
		logger.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func controllerNames() []string {
	names := make([]string, 0, len(controllerSetups))
	for n := range controllerSetups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// excludedNamespaces is kube-system, hyperbatch's own namespace and the --excluded-namespaces list,
// without repeats, in that order.
func excludedNamespaces(own, list string) ([]string, error) {
	out := []string{metav1.NamespaceSystem}
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	add(own)
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("--excluded-namespaces: %q is not a namespace name (%s); give a comma-separated list such as monitoring,ingress-nginx", n, strings.Join(errs, "; "))
		}
		add(n)
	}
	return out, nil
}

func kindNames() string {
	names := make([]string, 0, len(defaults.KindNames()))
	for _, k := range defaults.KindNames() {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

// selectedWebhookKinds parses --webhook-kinds.
func selectedWebhookKinds(spec string) ([]webhook.Kind, error) {
	kinds, err := defaults.ParseKinds(spec)
	if err != nil {
		return nil, fmt.Errorf("--webhook-kinds: %w", err)
	}
	return kinds, nil
}

// selectedControllers parses --controllers.
func selectedControllers(spec string) ([]string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "*" {
		return controllerNames(), nil
	}
	var out []string
	for _, n := range strings.Split(spec, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := controllerSetups[n]; !ok {
			return nil, fmt.Errorf("--controllers: unknown controller %q; known controllers are %s", n, strings.Join(controllerNames(), ", "))
		}
		out = append(out, n)
	}
	return out, nil
}
