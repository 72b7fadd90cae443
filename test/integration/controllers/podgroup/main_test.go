// Package podgroup tests the JobSet PodGroup controller against a real kube-apiserver (envtest). The
// test of a finished JobSet runs the real JobSet controller and kube-controller-manager's Job controller.
package podgroup

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
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
	stop, err := framework.StartManager(cfg, func(mgr manager.Manager) error { return podgroup.NewReconciler(mgr).SetupWithManager(mgr) })
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
