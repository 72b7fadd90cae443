// Package hyperjob tests the HyperJob controller against a real kube-apiserver (envtest) with the
// Volcano, Karmada and HyperJob CRDs, and kube-controller-manager's garbage collector. No Volcano or
// Karmada controller runs: the tests write Volcano Job status themselves.
package hyperjob

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env    *framework.Env
	kcmLog *bytes.Buffer
)

func TestMain(m *testing.M) {
	// Quiet unless HYPERJOB_TEST_LOG is set.
	if os.Getenv("HYPERJOB_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	var err error
	if env, err = framework.Start(framework.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane did not start: %v\n", err)
		os.Exit(1)
	}
	stopKCM, err := startGarbageCollector()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-controller-manager (garbage collector): %v\n", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	stopKCM()
	_ = env.Stop()
	os.Exit(code)
}

// startGarbageCollector runs kube-controller-manager with only the garbage-collector-controller
// against the envtest apiserver. envtest runs no controllers, but deletion in this product is the
// garbage collector's job: the HyperJob's children carry ownerReferences, and the controller deletes
// children in the foreground, which completes only when the garbage collector removes the
// foregroundDeletion finalizer. The kubeconfig is envtest's admin user (created by envtest's
// AddUser in the system:masters group).
func startGarbageCollector() (func(), error) {
	dir, err := os.MkdirTemp("", "hyperjob-kcm-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		return nil, err
	}
	kcmLog = &bytes.Buffer{}
	cmd := exec.Command(filepath.Join(framework.AssetsDir(), "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--controllers=garbage-collector-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		"--concurrent-gc-syncs=50",
		"--kube-api-qps=500", "--kube-api-burst=1000",
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = kcmLog, kcmLog
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = os.RemoveAll(dir)
	}
	if err := waitForGarbageCollector(); err != nil {
		stop()
		return nil, fmt.Errorf("%w\nkube-controller-manager output:\n%s", err, tail(kcmLog.String(), 4000))
	}
	return stop, nil
}

// waitForGarbageCollector proves the garbage collector works: a ConfigMap owned by a deleted
// ConfigMap must disappear.
func waitForGarbageCollector() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := env.Client
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-probe-owner", Namespace: "default"}}
	if err := c.Create(ctx, owner); err != nil {
		return err
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-probe-dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := c.Create(ctx, dep); err != nil {
		return err
	}
	if err := c.Delete(ctx, owner); err != nil {
		return err
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("the garbage collector did not delete a dependent within 90s: %w", err)
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// testConfig is envtest's admin config with client-side rate limiting raised far above anything the
// tests need, so they measure the controller, not the token bucket.
func testConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

// startManager runs a manager with the HyperJob controller whose cache sees only namespace (plus
// cluster-scoped objects), so tests do not disturb each other. The returned stop is idempotent and
// also runs at test cleanup.
func startManager(t testing.TB, cfg *rest.Config, namespace string) func() {
	t.Helper()
	o := ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	}
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	if err := hyperjob.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		t.Fatalf("setting up the HyperJob controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
