// Package schedulerenv runs the real hyperbatch-scheduler (kube-scheduler's app.Setup/app.Run with
// hyperbatch's plugin registry and docs/scheduler-config.yaml as --config) in the test process,
// against a test control plane. It is its own package so that only the tests that need a scheduler
// link kube-scheduler.
package schedulerenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/registry"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// SchedulerName is the profile docs/scheduler-config.yaml defines.
const SchedulerName = "hyperbatch-scheduler"

// Start runs the scheduler until ctx is cancelled; dir holds its kubeconfig and config. The returned
// channel closes when the scheduler has stopped.
func Start(ctx context.Context, cfg *rest.Config, dir string) (<-chan struct{}, error) {
	kubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
	if err := framework.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "scheduler-config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the scheduler configuration: %w", err)
	}
	js, err := yaml.ToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("docs/scheduler-config.yaml: %w", err)
	}
	var conf map[string]any
	if err := json.Unmarshal(js, &conf); err != nil {
		return nil, fmt.Errorf("docs/scheduler-config.yaml: %w", err)
	}
	conn, _ := conf["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	conf["clientConnection"] = conn
	out, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
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
	if s.Profiles[SchedulerName] == nil {
		return nil, fmt.Errorf("profile %s missing from docs/scheduler-config.yaml", SchedulerName)
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
