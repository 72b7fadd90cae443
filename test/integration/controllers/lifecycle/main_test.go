// Package lifecycle tests the lifecycle controller against a real kube-apiserver (envtest) with the
// Volcano, JobSet and HyperJob CRDs, kube-controller-manager (garbage collector and Job controller,
// so foreground deletion completes and JobSet's Jobs get pods), the HyperJob controller and — for
// JobSets — the real JobSet v0.11.0 reconciler run in-process (sigs.k8s.io/jobset/pkg/controllers).
// No Volcano controller runs here: Volcano Jobs are checked up to the AbortJob Command this
// controller creates.
package lifecycle

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	jsctrl "sigs.k8s.io/jobset/pkg/controllers"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// env is the envtest control plane every test in this package uses.
var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(framework.SuiteOptions{Name: "hb-lifecycle-it", Quiet: framework.QuietDiscard,
		KubeControllers: []string{"job-controller", "serviceaccount-controller"}},
		func(s *framework.Suite) (int, error) {
			env = s.Env
			return m.Run(), nil
		}))
}

// testConfig is envtest's admin config without client-side rate limiting to speak of
// (framework.Unthrottled).
func testConfig() *rest.Config { return framework.Unthrottled(env.Config) }

// managerOptions choose the controllers of a test manager besides the lifecycle controller.
type managerOptions struct {
	hyperJob bool // the HyperJob controller
	jobSet   bool // the real JobSet reconciler (sigs.k8s.io/jobset v0.11.0)
	// podGroupStatus: hyperbatch's PodGroup lifecycle controller, which enqueues the PodGroups of
	// hyperbatch-scheduler's Volcano Jobs (Volcano's job controller creates pods only after that).
	podGroupStatus bool
}

// startManager runs a manager whose cache sees only namespace. The returned stop is idempotent and
// also runs at test cleanup.
func startManager(t *testing.T, namespace string, mo managerOptions) func() {
	t.Helper()
	stop := framework.StartTestManager(t, testConfig(), namespace, nil, func(mgr manager.Manager) error {
		if err := lifecycle.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the lifecycle controller: %w", err)
		}
		if mo.hyperJob {
			if err := hyperjob.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
				return fmt.Errorf("setting up the HyperJob controller: %w", err)
			}
		}
		if mo.podGroupStatus {
			r, err := podgroupstatus.NewReconciler(mgr, podgroupstatus.Options{})
			if err == nil {
				err = r.SetupWithManager(mgr)
			}
			if err != nil {
				return fmt.Errorf("setting up the PodGroup status controller: %w", err)
			}
		}
		if mo.jobSet {
			if err := jsctrl.SetupJobSetIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
				return fmt.Errorf("JobSet indexes: %w", err)
			}
			r := jsctrl.NewJobSetReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorderFor("jobset"))
			if err := r.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("setting up the JobSet controller: %w", err)
			}
		}
		return nil
	})
	if mo.hyperJob {
		// Positive signal that the HyperJob controller runs: a probe HyperJob (no lifecycle
		// annotations) gets its child. Tests then create HyperJobs whose deadline counts from their
		// creation, and must not race the manager's start-up.
		probes++
		probe := fmt.Sprintf("probe-%d", probes)
		create(t, newHyperJob(namespace, probe, 1, -1, -1))
		waitForChildren(t, namespace, probe, 1)
	}
	return stop
}

// probes numbers the probe HyperJobs of startManager.
var probes int
