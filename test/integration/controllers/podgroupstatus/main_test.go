// Package podgroupstatus tests the PodGroup lifecycle controller against a real kube-apiserver with
// the real hyperbatch-scheduler running in the test process (no kubelet: the test plays the kubelet
// and moves bound pods to Running and Succeeded).
package podgroupstatus

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/schedulerenv"
)

var (
	env     *framework.Env
	cs      kubernetes.Interface
	logPath string
	// ctl is the running controller (replaced by the restart test).
	ctl *controllerRun
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Scheduler and controller logs go to a file whose tail is printed when a test fails
	// (HB_TEST_LOG=stderr keeps them on stderr).
	os.Exit(framework.RunSuite(framework.SuiteOptions{Name: "hb-pgstatus-it", LogFile: "test.log"},
		func(s *framework.Suite) (int, error) { return run(m, s) }))
}

func run(m *testing.M, suite *framework.Suite) (int, error) {
	env, cs, logPath = suite.Env, suite.Clientset, suite.LogPath
	dir := suite.Dir
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, err := schedulerenv.Start(ctx, env.Config, dir)
	if err != nil {
		return 0, err
	}
	if ctl, err = startController(); err != nil {
		return 0, err
	}
	code := m.Run()
	ctl.stop()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "scheduler did not stop within 30s")
	}
	return code, nil
}

// writeCounter counts the mutating requests (POST, PUT, PATCH, DELETE) the controller's client sends
// for PodGroups, per PodGroup name, at the HTTP transport.
type writeCounter struct {
	mu     sync.Mutex
	byName map[string]int
	total  int
}

func (w *writeCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if i := strings.Index(req.URL.Path, "/podgroups/"); i >= 0 {
				name := strings.SplitN(req.URL.Path[i+len("/podgroups/"):], "/", 2)[0]
				w.mu.Lock()
				w.byName[name]++
				w.total++
				w.mu.Unlock()
			}
		}
		return next.RoundTrip(req)
	})
}

func (w *writeCounter) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

func (w *writeCounter) For(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byName[name]
}

type controllerRun struct {
	writes *writeCounter
	// cache is the controller's informer cache: tests wait on it for what the controller has seen.
	cache client.Reader
	mgr   *framework.RunningManager
}

// startController starts a manager with only the podgroupstatus controller, its writes counted.
func startController() (*controllerRun, error) {
	w := &writeCounter{byName: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(w.RoundTrip)
	// The restart test runs a second controller of the same name in this process
	// (TestManagerOptions allows it).
	m, err := framework.StartManagerWith(cfg, framework.TestManagerOptions(""), func(mgr manager.Manager) error {
		r, err := podgroupstatus.NewReconciler(mgr, podgroupstatus.Options{})
		if err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	})
	if err != nil {
		return nil, err
	}
	return &controllerRun{writes: w, cache: m.GetCache(), mgr: m}, nil
}

func (c *controllerRun) stop() { c.mgr.StopOrReport() }
