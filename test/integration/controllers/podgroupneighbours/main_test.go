// Package podgroupneighbours tests JobSet gangs with the real neighbours: the order "PodGroup before
// the first pod" with the JobSet controller (sigs.k8s.io/jobset v0.11.0) and kube-controller-manager's
// Job controller, and a TrainJob that Kubeflow Trainer's controller (v2.3.0) turns into a JobSet.
// hyperbatch's webhooks are served to the apiserver (the JobSet defaulting that puts the pods in the
// gang, and the PodGroup gate on the JobSet's pods) and controllers/podgroup runs in a manager of its
// own, whose PodGroup writes the test can hold at the HTTP transport to play a slow controller.
package podgroupneighbours

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env  *framework.WebhookEnv
	hold = newWriteHold()
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	// Trainer's CRDs (and the scheduler-plugins PodGroup its controller watches) beside the usual ones.
	crds := append(framework.DefaultCRDDirs(), filepath.Join(framework.RepoRoot(), "_output", "crds", "trainer"))
	if env, err = framework.StartWithWebhooks(framework.WebhookEnvOptions{CRDDirs: crds}); err != nil {
		fmt.Fprintf(os.Stderr, "control plane with webhooks did not start: %v\n", err)
		return 1
	}
	defer env.Stop()
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(hold.RoundTrip)
	stop, err := framework.StartManager(cfg, func(mgr manager.Manager) error { return podgroup.NewReconciler(mgr).SetupWithManager(mgr) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	code := m.Run()
	hold.Release()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
	}
	return code
}

// writeHold delays the podgroup controller's PodGroup writes (POST, PATCH) while it is held: the
// request waits at the transport until Release, as a controller that is slow or not running would
// leave the PodGroup missing.
type writeHold struct {
	mu      sync.Mutex
	held    chan struct{} // nil: not held; closed by Release
	blocked int           // writes that waited
}

func newWriteHold() *writeHold { return &writeHold{} }

// Hold makes the next PodGroup writes wait until Release.
func (h *writeHold) Hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.blocked = make(chan struct{}), 0
}

// Release lets the held writes (and every later one) through.
func (h *writeHold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held != nil {
		close(h.held)
		h.held = nil
	}
}

// Blocked is the number of PodGroup writes that waited since Hold.
func (h *writeHold) Blocked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blocked
}

func (h *writeHold) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if (req.Method == http.MethodPatch || req.Method == http.MethodPost) && strings.Contains(req.URL.Path, "/podgroups") {
			h.mu.Lock()
			held := h.held
			if held != nil {
				h.blocked++
			}
			h.mu.Unlock()
			if held != nil {
				select {
				case <-held:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
		}
		return next.RoundTrip(req)
	})
}
