// Package podgroup tests the JobSet PodGroup controller against a real kube-apiserver (envtest). The
// test of a finished JobSet runs the real JobSet controller and kube-controller-manager's Job controller.
package podgroup

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env    *framework.Env
	writes = framework.NewWriteCounter()
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if env, err = framework.Start(framework.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "control plane did not start: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(writes.RoundTrip)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err == nil {
		err = podgroup.NewReconciler(mgr).SetupWithManager(mgr)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "setting up the manager: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
	}
	return code
}
