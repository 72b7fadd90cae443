package framework

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RunControllerMain is a TestMain for a controller's integration tests: it starts the control plane
// (Env is set before setup runs), a manager with the controllers setup adds, runs the tests and
// stops everything. It returns the process exit code.
func RunControllerMain(m *testing.M, envp **Env, setup func(manager.Manager) error) int {
	return RunControlPlane(envp, func(env *Env) int { return RunWithManager(m, env.Config, setup) })
}

// RunMain is a TestMain for tests that start their own controllers: it starts the control plane
// into *envp, runs the tests and stops it. It returns the process exit code.
func RunMain(m *testing.M, envp **Env) int {
	return RunControlPlane(envp, func(*Env) int { return m.Run() })
}

// RunWithManager runs the tests with a manager on cfg (possibly with a wrapped transport) holding
// what setup adds, and stops it afterwards. It returns the process exit code.
func RunWithManager(m *testing.M, cfg *rest.Config, setup func(manager.Manager) error) int {
	stop, err := StartManager(cfg, setup)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
	}
	return code
}

// RunControlPlane is the body of a TestMain: it starts the control plane into *envp, calls run and
// stops the control plane. It returns run's exit code.
func RunControlPlane(envp **Env, run func(*Env) int) int {
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
	return run(env)
}

// StartManager starts a manager on cfg (the test's config, possibly with a wrapped transport) with
// what setup adds, and returns a function that stops it and returns its error.
func StartManager(cfg *rest.Config, setup func(manager.Manager) error) (stop func() error, err error) {
	m, err := StartManagerWith(cfg, TestManagerOptions(""), setup)
	if err != nil {
		return nil, err
	}
	return m.Stop, nil
}

// RoundTripFunc is an http.RoundTripper from a function, for rest.Config.Wrap in tests that count
// or hold requests at a client's transport.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
