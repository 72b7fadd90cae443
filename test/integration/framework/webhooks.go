package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// WebhookEnv is a control plane whose kube-apiserver calls hyperbatch's admission webhooks, served
// by a controller-runtime manager in the test process on 127.0.0.1 (URL-mode configurations built by
// webhook.Configurations, TLS from envtest).
type WebhookEnv struct {
	*Env
	// URL is the webhook server's base URL, https://127.0.0.1:<port>.
	URL string
	// CAData is the PEM CA that signed the webhook server's certificate.
	CAData  []byte
	Manager manager.Manager
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// WebhookEnvOptions tune StartWithWebhooks.
type WebhookEnvOptions struct {
	// Fixtures are created before the manager starts (policies, PriorityClasses, namespaces).
	Fixtures []client.Object
	// Register, when set, adds more handlers or runnables to the manager before it starts.
	Register func(manager.Manager) error
	// CRDDirs replaces the default CRD directories (Options.CRDDirs).
	CRDDirs []string
	// Config, when set, edits the webhook configurations' options before they are built (e.g. a
	// PodNamespaceSelector that leaves some namespaces to the admission policies).
	Config func(*hbwebhook.ConfigOptions)
}

// StartWithWebhooks starts the control plane with hyperbatch's webhook configurations installed and
// a manager serving webhook.Setup's handlers, and returns once the webhooks are ready.
func StartWithWebhooks(opts WebhookEnvOptions) (*WebhookEnv, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port for the webhook server: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	co := hbwebhook.ConfigOptions{URL: url}
	if opts.Config != nil {
		opts.Config(&co)
	}
	mwc, vwc := hbwebhook.Configurations(co)
	env, err := Start(Options{CRDDirs: opts.CRDDirs, WebhookInstall: &envtest.WebhookInstallOptions{
		LocalServingHost:   "127.0.0.1",
		LocalServingPort:   port,
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mwc},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc},
	}})
	if err != nil {
		return nil, err
	}
	w := &WebhookEnv{Env: env, URL: url, CAData: env.WebhookOptions().LocalServingCAData}
	if err := w.startManager(opts); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

func (w *WebhookEnv) startManager(opts WebhookEnvOptions) error {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for _, o := range opts.Fixtures {
		if err := w.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating fixture %T %s: %w", o, o.GetName(), err)
		}
	}
	wo := w.WebhookOptions()
	mgr, err := ctrl.NewManager(w.Config, ctrl.Options{
		Scheme:  scheme.New(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir}),
	})
	if err != nil {
		return fmt.Errorf("creating the webhook manager: %w", err)
	}
	if err := hbwebhook.Setup(mgr, hbwebhook.Options{}); err != nil {
		return fmt.Errorf("setting up webhooks: %w", err)
	}
	if opts.Register != nil {
		if err := opts.Register(mgr); err != nil {
			return fmt.Errorf("registering extra handlers: %w", err)
		}
	}
	w.Manager = mgr
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := mgr.Start(ctx); err != nil {
			ctrl.Log.Error(err, "webhook manager stopped")
		}
	}()
	ready := hbwebhook.ReadyCheck(mgr)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil)
		return ready(req) == nil, nil
	}); err != nil {
		return fmt.Errorf("webhook server never became ready: %w", err)
	}
	return nil
}

// StopManager stops the manager only: the webhook server goes down while the configurations stay
// installed, as in a hyperbatch outage. Stop still stops the control plane afterwards.
func (w *WebhookEnv) StopManager() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

// Stop stops the manager and the control plane.
func (w *WebhookEnv) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
	if err := w.Env.Stop(); err != nil {
		ctrl.Log.Error(err, "stopping control plane")
	}
}
