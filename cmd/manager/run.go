package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hyperbatch/hyperbatch/certs"
	"github.com/hyperbatch/hyperbatch/controllers/admissionparams"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers"
	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/controllers/namespacelabel"
	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/controllers/workloadpolicy"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// controllerSetups maps a controller's name (as given to --controllers) to the function that adds it
// to the manager.
var controllerSetups = map[string]func(ctrl.Manager, options) error{
	"workloadpolicy": func(m ctrl.Manager, _ options) error { return workloadpolicy.NewReconciler(m).SetupWithManager(m) },
	"hyperjob":       func(m ctrl.Manager, _ options) error { return hyperjob.NewReconciler(m).SetupWithManager(m) },
	"lifecycle": func(m ctrl.Manager, o options) error {
		r := lifecycle.NewReconciler(m)
		if o.mode == modeControlPlane {
			r = r.OnKarmadaPlane()
		}
		return r.SetupWithManager(m)
	},
	// The admission policies' per-namespace params (policy mode; --admission).
	"admissionparams": func(m ctrl.Manager, o options) error {
		if o.admissionMode != admissionPolicy {
			ctrl.Log.Info("admission params are off: Pods are admitted by webhooks", "admission", o.admissionMode)
			return nil
		}
		return admissionparams.NewReconciler(m, o.excluded...).SetupWithManager(m)
	},
	"namespacelabel": func(m ctrl.Manager, o options) error {
		return namespacelabel.NewReconciler(m, o.excluded...).SetupWithManager(m)
	},
	// One PodGroup per gang JobSet (minMember, minResources, queue, topology), released on finish.
	"podgroup": func(m ctrl.Manager, _ options) error { return podgroup.NewReconciler(m).SetupWithManager(m) },
	// PodGroup lifecycle (enqueue, phase, counts, conditions) for hyperbatch-scheduler's gangs.
	"podgroupstatus": func(m ctrl.Manager, _ options) error {
		r, err := podgroupstatus.NewReconciler(m, podgroupstatus.Options{})
		if err != nil {
			return err
		}
		return r.SetupWithManager(m)
	},
	// HyperNode discovery from the sources in --discovery-config (off without it).
	"hypernode": func(m ctrl.Manager, o options) error {
		if o.discoveryConfig == "" {
			ctrl.Log.Info("HyperNode discovery is off: no --discovery-config")
			return nil
		}
		file, err := config.Load(o.discoveryConfig)
		if err != nil {
			return err
		}
		c, err := hypernode.New(m.GetConfig(), hypernode.Options{
			Config: file, Registry: providers.Builtin(), Log: ctrl.Log.WithName(hypernode.EventSource),
			Events: m.GetEventRecorderFor(hypernode.EventSource),
		})
		if err != nil {
			return err
		}
		return m.Add(c)
	},
}

type options struct {
	// mode is --mode (modeMember or modeControlPlane); explicit names the flags given on the
	// command line.
	mode           string
	explicit       map[string]bool
	namespace      string
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	controllers    string
	enableWebhooks bool
	webhookKinds   string
	// admission is --admission; admissionMode its resolution (webhook or policy), set by run.
	admission     string
	admissionMode string
	// admissionWarnings keeps policy mode's Warn policy (--admission-warnings).
	admissionWarnings bool
	// kinds is --webhook-kinds, parsed by run.
	kinds          []webhook.Kind
	webhookHost    string
	webhookPort    int
	webhookCertDir string
	webhookService string
	webhookURL     string
	certMode       string
	certSecret     string
	certValidity   time.Duration
	kubeAPIQPS     float64
	kubeAPIBurst   int
	pprofAddr      string
	// discoveryConfig is the HyperNode discovery configuration file (Volcano's format).
	discoveryConfig string

	excludedNamespaces string
	// excluded is kube-system, namespace and excludedNamespaces, parsed by run.
	excluded []string
}

// Leader election, in hyperbatch's own namespace (config/rbac is generated from this marker).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=hyperbatch-system,resources=leases,verbs=get;list;watch;create;update;patch;delete

func run(o options) error {
	if err := applyMode(&o, o.explicit); err != nil {
		return err
	}
	names, err := selectedControllers(o.controllers)
	if err != nil {
		return err
	}
	if o.excluded, err = excludedNamespaces(o.namespace, o.excludedNamespaces); err != nil {
		return err
	}
	if o.kinds, err = selectedWebhookKinds(o.webhookKinds); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig (set --kubeconfig or KUBECONFIG, or run in a cluster): %w", err)
	}
	if o.kubeAPIQPS != 0 {
		cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	}
	var mode, why string
	if o.mode == modeControlPlane {
		if err := checkControlPlane(context.Background(), cfg, o.namespace); err != nil {
			return err
		}
		// No Pod is admitted on a Karmada control plane, so the Pod admission policies have nothing
		// to do there.
		mode, why = admissionWebhook, "--mode=control-plane admits no Pods"
	} else if mode, why, err = resolveAdmission(cfg, o.admission); err != nil {
		return err
	}
	o.admissionMode = mode
	setAdmissionMode(mode, why)
	if err := applyAdmissionPolicies(context.Background(), cfg, mode, o); err != nil {
		return err
	}
	if mode == admissionPolicy && !slices.Contains(names, admissionparams.ControllerName) {
		// The policies read the params it writes: policy mode always runs it.
		names = append(names, admissionparams.ControllerName)
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "hyperbatch-manager.hyperbatch.dev",
		LeaderElectionNamespace: o.namespace,
		// Release the Lease on clean shutdown so a restarted manager takes over at once.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(),
	}

	var rot *certs.Rotator
	if o.enableWebhooks {
		if rot, err = webhookServer(cfg, o, &mgrOpts); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if o.enableWebhooks {
		if rot != nil {
			if err := rot.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("setting up webhook certificates: %w", err)
			}
		}
		// Without the podgroup controller nothing creates the PodGroups the PodGroup gate waits for.
		if err := webhook.Setup(mgr, webhook.Options{Kinds: o.kinds, ExcludedNamespaces: o.excluded, NoPodGroupGate: !slices.Contains(names, "podgroup")}); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhooks", webhook.ReadyCheck(mgr)); err != nil {
			return fmt.Errorf("adding webhook ready check: %w", err)
		}
	} else if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	for _, n := range names {
		if err := controllerSetups[n](mgr, o); err != nil {
			return fmt.Errorf("setting up controller %s: %w", n, err)
		}
	}
	ctrl.Log.Info("starting manager", "mode", o.mode, "admission", o.admissionMode, "controllers", names, "webhooks", o.enableWebhooks, "webhookKinds", o.kinds, "certMode", o.certMode, "webhookURL", o.webhookURL)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// webhookServer configures the webhook server and, unless certificates are external, the rotator
// that provides them. In URL mode it first creates or updates the webhook configurations.
func webhookServer(cfg *rest.Config, o options, mgrOpts *manager.Options) (*certs.Rotator, error) {
	var ips []net.IP
	if o.webhookURL != "" {
		u, err := url.Parse(o.webhookURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("--webhook-url %q must be an https URL such as https://127.0.0.1:9443", o.webhookURL)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		}
		if err := applyURLModeConfigurations(cfg, o); err != nil {
			return nil, err
		}
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: o.webhookHost, Port: o.webhookPort, CertDir: o.webhookCertDir})
	if certs.Mode(o.certMode) != certs.ModeSelf && certs.Mode(o.certMode) != certs.ModeCertManager {
		if o.certMode != "external" {
			return nil, fmt.Errorf("--cert-mode %q is not one of self, cert-manager, external", o.certMode)
		}
		mgrOpts.WebhookServer = srv
		return nil, nil
	}
	if certs.Mode(o.certMode) == certs.ModeSelf && o.certValidity < minCertValidity {
		return nil, fmt.Errorf("--cert-validity %s is too short: use at least %s (the webhook server picks a renewed certificate up within 10 s, and a renewal comes at half the lifetime at the latest)", o.certValidity, minCertValidity)
	}
	rot, err := certs.New(certs.Config{
		Mode:                            certs.Mode(o.certMode),
		SecretNamespace:                 o.namespace,
		SecretName:                      o.certSecret,
		CertDir:                         o.webhookCertDir,
		CertValidity:                    o.certValidity,
		ServiceName:                     o.webhookService,
		IPAddresses:                     ips,
		MutatingWebhookConfigurations:   []string{webhook.MutatingConfigurationName},
		ValidatingWebhookConfigurations: []string{webhook.ValidatingConfigurationName},
	})
	if err != nil {
		return nil, fmt.Errorf("configuring webhook certificates: %w", err)
	}
	mgrOpts.WebhookServer = certs.WaitForCerts(srv, rot.Ready())
	return rot, nil
}

// minCertValidity is the shortest --cert-validity accepted.
const minCertValidity = 2 * time.Minute

// applyURLModeConfigurations creates or updates hyperbatch's webhook configurations pointing at
// --webhook-url, keeping the caBundle the rotator injected (server-side apply leaves fields it does
// not own alone, and the configuration sent here carries no caBundle).
func applyURLModeConfigurations(cfg *rest.Config, o options) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("creating client for webhook configurations: %w", err)
	}
	kinds := webhookKindsFor(o.admissionMode, o.kinds)
	if len(kinds) == 0 {
		ctrl.Log.Info("no webhook configuration to register: the admission policies admit every kind of --webhook-kinds", "webhookKinds", o.kinds)
		return nil
	}
	mwc, vwc := webhook.Configurations(webhook.ConfigOptions{URL: o.webhookURL, Namespace: o.namespace, ExcludedNamespaces: o.excluded, Kinds: kinds})
	ctx := context.Background()
	for _, obj := range []client.Object{mwc, vwc} {
		obj.SetManagedFields(nil)
		//nolint:staticcheck // client.Apply with a typed object is the simplest server-side apply here.
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("hyperbatch-manager"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %T %s for --webhook-url %s: %w", obj, obj.GetName(), o.webhookURL, err)
		}
	}
	return nil
}

// cacheOptions is the manager cache's shape. The only ConfigMaps the manager reads are the admission
// params it writes. Pods are cached cluster-wide (the PodGroup status controller's members, the
// gang controller's PriceFollowingPods) without their managedFields, which no controller reads and
// which are a large part of a pod's size at 10,000 pods. Other kinds keep theirs: the HyperJob
// controller hands a PropagationPolicy's fields to server-side apply from its managedFields.
func cacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{admissionpolicy.ParamsLabel: "true"})},
		&corev1.Pod{}:       {Transform: cache.TransformStripManagedFields()},
	}}
}
