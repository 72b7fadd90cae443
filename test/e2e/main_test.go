//go:build e2e

// Package e2e is hyperbatch's end-to-end suite. It runs against any cluster that has hyperbatch
// installed: the local cluster (`make test` and `make test-e2e` start one with hack/localcluster) or a
// kind cluster (test/kind). Point it at a running cluster with HYPERBATCH_E2E_KUBECONFIG; without it,
// TestMain starts a private local cluster (hack/localcluster, in _output/e2e on ports from 17443, so it
// never collides with a `make run` cluster) and stops it afterwards. Tests reach clusters by name
// through test/e2e/framework.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	itframework "github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	suite *e2efw.Suite
	// primary is the cluster hyperbatch runs in; c and wc are its client (wc watches: tests that
	// must not miss short-lived objects, such as a Volcano Job's PodGroup that lives only until the
	// Job completes, record them from a watch opened before they create anything).
	primary *e2efw.Cluster
	c       client.Client
	wc      client.WithWatch
)

func TestMain(m *testing.M) {
	itframework.SetupLogs(itframework.QuietErrors)
	var err error
	if suite, err = e2efw.Setup(os.Getenv("HYPERBATCH_E2E_KUBECONFIG")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e clusters: %v\n", err)
		os.Exit(1)
	}
	primary = suite.Cluster(e2efw.Primary)
	c, wc = primary.Client, primary.Client
	code := m.Run()
	suite.Stop()
	os.Exit(code)
}
