package framework

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

// TestManagerOptions are the options of a test's manager: hyperbatch's scheme, no metrics or probe
// endpoints, and controller names that may repeat in one process (every test starts its own). With
// a namespace, the cache sees only that namespace (plus cluster-scoped objects), so tests running
// side by side do not disturb each other.
func TestManagerOptions(namespace string) ctrl.Options {
	o := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if namespace != "" {
		o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
	}
	return o
}

// RunningManager is a started manager.
type RunningManager struct {
	manager.Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartManagerWith creates a manager on cfg with o, lets setup add its controllers and starts it.
func StartManagerWith(cfg *rest.Config, o ctrl.Options, setup func(manager.Manager) error) (*RunningManager, error) {
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := setup(mgr); err != nil {
		return nil, fmt.Errorf("setting up the manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &RunningManager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	return m, nil
}

// Stop stops the manager and returns its error; later calls return the same.
func (m *RunningManager) Stop() error {
	m.once.Do(func() {
		m.cancel()
		m.err = <-m.done
	})
	return m.err
}

// StartTestManager starts, for one test, a manager on cfg whose cache sees only namespace
// (TestManagerOptions, changed by edit when not nil) with the controllers setup adds. The returned
// stop is idempotent and also runs at test cleanup; a manager error fails the test.
func StartTestManager(t testing.TB, cfg *rest.Config, namespace string, edit func(*ctrl.Options), setup func(manager.Manager) error) func() {
	t.Helper()
	m := StartTestManagerFor(t, cfg, namespace, edit, setup)
	return func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	}
}

// StartTestManagerFor is StartTestManager returning the running manager (its cache, its client).
func StartTestManagerFor(t testing.TB, cfg *rest.Config, namespace string, edit func(*ctrl.Options), setup func(manager.Manager) error) *RunningManager {
	t.Helper()
	o := TestManagerOptions(namespace)
	if edit != nil {
		edit(&o)
	}
	m, err := StartManagerWith(cfg, o, setup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return m
}

// StopOrReport stops m and reports its error on stderr (for TestMain).
func (m *RunningManager) StopOrReport() {
	if err := m.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
	}
}
