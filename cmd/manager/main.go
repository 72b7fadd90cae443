// Command manager runs hyperbatch's admission webhooks and controllers in one controller-runtime
// manager. Controllers run only on the elected leader; webhooks are served by every replica.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hyperbatch/hyperbatch/controllers/workloadpolicy"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// controllerSetups maps a controller's name (as given to --controllers) to the function that adds it
// to the manager.
var controllerSetups = map[string]func(ctrl.Manager) error{
	"workloadpolicy": func(m ctrl.Manager) error { return workloadpolicy.NewReconciler(m).SetupWithManager(m) },
}

type options struct {
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	webhookPort    int
	webhookCertDir string
	enableWebhooks bool
	controllers    string
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus /metrics endpoint binds to; 0 disables it")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so only one replica runs the controllers")
	flag.StringVar(&o.leaderElectNS, "leader-election-namespace", "hyperbatch-system", "namespace of the leader-election Lease (needed out of cluster)")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "port the admission webhooks are served on")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key for the webhook server")
	flag.BoolVar(&o.enableWebhooks, "enable-webhooks", false, "serve the admission webhooks")
	flag.StringVar(&o.controllers, "controllers", "*", "comma-separated controllers to run ('*' for all): "+strings.Join(controllerNames(), ","))
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	if err := run(o); err != nil {
		logger.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func controllerNames() []string {
	names := make([]string, 0, len(controllerSetups))
	for n := range controllerSetups {
		names = append(names, n)
	}
	return names
}

func selectedControllers(spec string) ([]string, error) {
	if spec == "*" || spec == "" {
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

func run(o options) error {
	names, err := selectedControllers(o.controllers)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig (set --kubeconfig or KUBECONFIG, or run in a cluster): %w", err)
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "hyperbatch-manager.hyperbatch.dev",
		LeaderElectionNamespace: o.leaderElectNS,
		// Release the Lease on clean shutdown so a restarted manager takes over at once.
		LeaderElectionReleaseOnCancel: true,
	}
	if o.enableWebhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.webhookCertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	for _, n := range names {
		if err := controllerSetups[n](mgr); err != nil {
			return fmt.Errorf("setting up controller %s: %w", n, err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	ready := healthz.Ping
	if o.enableWebhooks {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	ctrl.Log.Info("starting manager", "controllers", names, "webhooks", o.enableWebhooks)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
