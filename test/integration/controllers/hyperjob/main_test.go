// Package hyperjob tests the HyperJob controller against a real kube-apiserver (envtest) with the
// Volcano, Karmada and HyperJob CRDs, and kube-controller-manager's garbage collector. No Volcano or
// Karmada controller runs: the tests write Volcano Job status themselves.
package hyperjob

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// env is the envtest control plane every test in this package uses.
var env *framework.Env

func TestMain(m *testing.M) {
	// kube-controller-manager runs its garbage collector.
	os.Exit(framework.RunSuite(framework.SuiteOptions{Name: "hb-hyperjob-it", Quiet: framework.QuietDiscard, KubeControllerManager: true},
		func(s *framework.Suite) (int, error) {
			env = s.Env
			return m.Run(), nil
		}))
}

// testConfig is envtest's admin config without client-side rate limiting to speak of
// (framework.Unthrottled).
func testConfig() *rest.Config { return framework.Unthrottled(env.Config) }

// startManager runs a manager with the HyperJob controller whose cache sees only namespace (plus
// cluster-scoped objects), so tests do not disturb each other. The returned stop is idempotent and
// also runs at test cleanup.
func startManager(t testing.TB, cfg *rest.Config, namespace string) func() {
	t.Helper()
	return startManagerWith(t, cfg, namespace, nil)
}

// startManagerWith is startManager with the manager's options changed by edit first (nil: none).
func startManagerWith(t testing.TB, cfg *rest.Config, namespace string, edit func(*ctrl.Options)) func() {
	t.Helper()
	return framework.StartTestManager(t, cfg, namespace, edit, func(mgr manager.Manager) error {
		return hyperjob.NewReconciler(mgr).SetupWithManager(mgr)
	})
}
