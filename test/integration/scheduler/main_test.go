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
)

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scheduler integration: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "hb-sched-it")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing %s: %v\n", dir, err)
		}
	}()
	// Scheduler logs and the test client's API warnings go to a file (its tail is printed when a test
	// fails); HB_TEST_LOG=stderr keeps them on stderr.
	path, closeLog, err := framework.LogToFile(dir, "scheduler.log")
	if err != nil {
		return 0, err
	}
	defer closeLog()
	logPath = path
	env, err = framework.Start(framework.Options{})
	if err != nil {
		return 0, fmt.Errorf("control plane did not start: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
		}
	}()
	if cs, err = kubernetes.NewForConfig(env.Config); err != nil {
		return 0, err
	}

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
