package framework

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// RunControllerMain is a TestMain for a controller's integration tests: it starts the control plane
// (Env is set before setup runs), a manager with the controllers setup adds, runs the tests and
// stops everything. It returns the process exit code.
func RunControllerMain(m *testing.M, envp **Env, setup func(manager.Manager) error) int {
	env, err := Start(Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane did not start: %v\n", err)
		return 1
	}
	*envp = env
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
		}
	}()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err == nil {
		err = setup(mgr)
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

// RunMain is a TestMain for tests that start their own controllers: it starts the control plane
// into *envp, runs the tests and stops it. It returns the process exit code.
func RunMain(m *testing.M, envp **Env) int {
	env, err := Start(Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane did not start: %v\n", err)
		return 1
	}
	*envp = env
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
		}
	}()
	return m.Run()
}
