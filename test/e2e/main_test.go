//go:build e2e

// Package e2e is hyperbatch's end-to-end suite. It runs against any cluster that has hyperbatch
// installed: the local cluster (`make test` and `make test-e2e` start one with hack/localcluster) or a
// kind cluster (test/kind). Point it at a running cluster with HYPERBATCH_E2E_KUBECONFIG; without it,
// TestMain starts a private local cluster (hack/localcluster, in _output/e2e on ports from 17443, so it
// never collides with a `make run` cluster) and stops it afterwards.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

var (
	c client.Client
	// wc watches: tests that must not miss short-lived objects (a Volcano Job's PodGroup lives only
	// until the Job completes) record them from a watch opened before they create anything.
	wc         client.WithWatch
	kubeconfig string
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	kubeconfig = os.Getenv("HYPERBATCH_E2E_KUBECONFIG")
	if kubeconfig == "" {
		var stop func()
		var err error
		if kubeconfig, stop, err = startLocalCluster(); err != nil {
			fmt.Fprintf(os.Stderr, "starting the local cluster for e2e: %v\n", err)
			os.Exit(1)
		}
		code := runSuite(m)
		stop()
		os.Exit(code)
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loading %s: %v\n", kubeconfig, err)
		return 1
	}
	if wc, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintf(os.Stderr, "creating client: %v\n", err)
		return 1
	}
	c = wc
	return m.Run()
}

// startLocalCluster runs `go run ./hack/localcluster up` for a private cluster and returns its
// kubeconfig and a function that tears it down.
func startLocalCluster() (string, func(), error) {
	root := repoRoot()
	dir := filepath.Join(root, "_output", "e2e")
	bin := os.Getenv("HYPERBATCH_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	run := func(args ...string) error {
		cmd := exec.Command("go", append([]string{"run", "./hack/localcluster"}, args...)...)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	down := func() {
		if err := run("down", "--dir", dir); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the e2e local cluster: %v\n", err)
		}
	}
	down() // leftovers of an interrupted run
	if err := run("up", "--dir", dir, "--bin", bin, "--port-base", "17443", "--nodes", "16", "--no-demo", "--discover"); err != nil {
		down()
		return "", nil, fmt.Errorf("hack/localcluster up (logs in %s/logs): %w", dir, err)
	}
	return filepath.Join(dir, "kubeconfig"), down, nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
