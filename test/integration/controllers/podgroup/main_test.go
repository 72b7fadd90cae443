// Package podgroup tests the JobSet PodGroup controller against a real kube-apiserver (envtest). The
// test of a finished JobSet runs the real JobSet controller and kube-controller-manager's Job controller.
package podgroup

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env    *framework.Env
	writes = framework.NewWriteCounter()
	// ctlCache is the controller's informer cache: tests wait on it for what the controller has seen.
	ctlCache client.Reader
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return framework.RunControlPlane(&env, func(env *framework.Env) int {
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(writes.RoundTrip)
		return framework.RunWithManager(m, cfg, func(mgr manager.Manager) error {
			ctlCache = mgr.GetCache()
			return podgroup.NewReconciler(mgr).SetupWithManager(mgr)
		})
	})
}
