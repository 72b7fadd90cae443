// Package podgroup tests the JobSet PodGroup controller against a real kube-apiserver (envtest). The
// test of a finished JobSet runs the real JobSet controller and kube-controller-manager's Job controller.
package podgroup

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env    *framework.Env
	writes = &writeCounter{byPath: map[string]int{}}
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

// writeCounter counts the mutating requests (POST, PUT, PATCH, DELETE) the controller's client sends,
// by resource kind and name ("podgroups/<name>", "jobsets/<name>"), at the HTTP transport.
type writeCounter struct {
	mu     sync.Mutex
	byPath map[string]int
}

func (w *writeCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
			if len(parts) >= 2 {
				key := parts[len(parts)-2] + "/" + parts[len(parts)-1]
				if parts[len(parts)-1] == "status" && len(parts) >= 3 {
					key = parts[len(parts)-3] + "/" + parts[len(parts)-2]
				}
				w.mu.Lock()
				w.byPath[key]++
				w.mu.Unlock()
			}
		}
		return next.RoundTrip(req)
	})
}

// For is the number of writes to kind ("podgroups", "jobsets") named name.
func (w *writeCounter) For(kind, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byPath[kind+"/"+name]
}
