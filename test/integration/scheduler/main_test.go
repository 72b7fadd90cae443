// Package scheduler runs the real hyperbatch scheduler (kube-scheduler's app.Setup/app.Run with
// hyperbatch's plugin registry and docs/scheduler-config.yaml as --config) in-process against an
// envtest control plane with fake Nodes (no kubelet: binding is what the tests assert).
package scheduler

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/registry"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

const schedulerName = "hyperbatch-scheduler"

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
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scheduler integration: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	ctrllog.SetLogger(klog.NewKlogr()) // API warnings from the test client go to the scheduler log
	if apiserverMinor, err = framework.KubeAPIServerMinor(); err != nil {
		return 0, err
	}
	flags, err := upstreamWorkloadFlags(apiserverMinor)
	if err != nil {
		return 0, err
	}
	env, err = framework.Start(framework.Options{APIServerFlags: flags})
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
	dir, err := os.MkdirTemp("", "hb-sched-it")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "removing %s: %v\n", dir, err)
		}
	}()

	// Scheduler logs go to a file (its tail is printed when a test fails); HB_SCHEDULER_LOG=stderr keeps them.
	if os.Getenv("HB_SCHEDULER_LOG") != "stderr" {
		logPath = filepath.Join(dir, "scheduler.log")
		f, err := os.Create(logPath)
		if err != nil {
			return 0, err
		}
		defer func() {
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "closing scheduler log: %v\n", err)
			}
		}()
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		if v := os.Getenv("HB_SCHEDULER_V"); v != "" {
			_ = fs.Set("v", v)
		}
		klog.SetOutput(f)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done, err := startScheduler(ctx, env.Config, dir)
	if err != nil {
		cancel()
		return 0, err
	}
	code := m.Run()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "scheduler did not stop within 30s")
	}
	return code, nil
}

// startScheduler runs kube-scheduler as cmd/scheduler does: --config is docs/scheduler-config.yaml
// with clientConnection.kubeconfig pointed at the test control plane (as hack/localcluster does) and
// waitForEnqueue off (no lifecycle controller here).
func startScheduler(ctx context.Context, cfg *rest.Config, dir string) (<-chan struct{}, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, err
	}
	conf, err := framework.DocumentedSchedulerConfig()
	if err != nil {
		return nil, err
	}
	// No PodGroup lifecycle controller runs in this suite (controllers/podgroupstatus has its own):
	// gangs are placed once their pods exist.
	if err := framework.WithoutEnqueueWait(conf); err != nil {
		return nil, err
	}
	conn, _ := conf["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	conf["clientConnection"] = conn
	out, _ := json.Marshal(conf)
	configPath := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(configPath, out, 0o600); err != nil {
		return nil, err
	}

	opts := options.NewOptions()
	opts.ConfigFile = configPath
	opts.SecureServing.BindPort = 0 // no HTTPS endpoint in tests
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	cc, s, err := app.Setup(ctx, opts, registry.Options()...)
	if err != nil {
		return nil, fmt.Errorf("scheduler setup: %w", err)
	}
	sched = s
	profile = s.Profiles[schedulerName]
	if profile == nil {
		return nil, fmt.Errorf("profile %s missing from docs/scheduler-config.yaml", schedulerName)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, s); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "scheduler stopped: %v\n", err)
		}
	}()
	return done, nil
}
