// Package scheduler runs the real hyperbatch scheduler (kube-scheduler's app.Setup/app.Run with
// hyperbatch's plugin registry and docs/scheduler-config.yaml as --config) in-process against an
// envtest control plane with fake Nodes (no kubelet: binding is what the tests assert).
package scheduler

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/schedulerenv"
)

const schedulerName = schedulerenv.SchedulerName

var (
	env     *framework.Env
	cs      kubernetes.Interface
	sched   *kubescheduler.Scheduler
	profile schedframework.Framework
	logPath string
	// apiserverMinor is the control plane's Kubernetes minor (1.36 or 1.37 in make test).
	apiserverMinor int
)

func TestMain(m *testing.M) {
	flag.Parse()
	// Scheduler logs and the test client's API warnings go to a file (its tail is printed when a test
	// fails); HB_TEST_LOG=stderr keeps them on stderr.
	var err error
	if apiserverMinor, err = framework.KubeAPIServerMinor(); err != nil {
		fmt.Fprintf(os.Stderr, "scheduler integration: %v\n", err)
		os.Exit(1)
	}
	opts, err := upstreamWorkloadOptions(apiserverMinor)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scheduler integration: %v\n", err)
		os.Exit(1)
	}
	os.Exit(framework.RunSuite(framework.SuiteOptions{Name: "hb-sched-it", LogFile: "scheduler.log", Options: opts},
		func(s *framework.Suite) (int, error) { return run(m, s) }))
}

func run(m *testing.M, suite *framework.Suite) (int, error) {
	env, cs, logPath = suite.Env, suite.Clientset, suite.LogPath
	dir := suite.Dir
	ctx, cancel := context.WithCancel(context.Background())
	// No PodGroup lifecycle controller runs in this suite (controllers/podgroupstatus has its own):
	// gangs are placed once their pods exist.
	s, done, err := schedulerenv.Run(ctx, env.Config, dir, schedulerenv.Options{WithoutEnqueueWait: true})
	if err != nil {
		cancel()
		return 0, err
	}
	sched, profile = s, s.Profiles[schedulerName]
	code := m.Run()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "scheduler did not stop within 30s")
	}
	return code, nil
}
