package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// StartScheduler starts hyperbatch's own scheduler binary (bin/scheduler, `make build`; BinDir is
// HYPERBATCH_BIN when set) with --config and the shipped --feature-gates, serving HTTPS on a free loopback port (its delegated
// authentication reads kube-system's extension-apiserver-authentication ConfigMap, as in a cluster),
// and waits for /healthz. The configuration names the kubeconfig (clientConnection.kubeconfig);
// o.Kubeconfig, when set, is used for delegated authentication and authorization.
func StartScheduler(ctx context.Context, o NeighbourOptions, config string) (*Process, error) {
	port, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	if o.BinDir == "" {
		o.BinDir = HyperbatchBinDir()
	}
	args := []string{"--config=" + config, "--feature-gates=" + localproc.SchedulerFeatureGates, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + o.LogDir, "-v=2"}
	if o.Kubeconfig != "" {
		// In a pod these default to the ServiceAccount; outside one they must be named, or delegated
		// authentication and authorization are skipped.
		args = append(args, "--authentication-kubeconfig="+o.Kubeconfig, "--authorization-kubeconfig="+o.Kubeconfig)
	}
	return StartProcess(ctx, o, "scheduler", args, httpOK(fmt.Sprintf("https://%s/healthz", localproc.Loopback(port))))
}

// HyperbatchBinDir is where `make build` puts bin/manager and bin/scheduler: HYPERBATCH_BIN, or the
// project's bin/.
func HyperbatchBinDir() string {
	if d := os.Getenv("HYPERBATCH_BIN"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin")
}

// DocumentedSchedulerConfig is docs/scheduler-config.yaml (the scheduler's documented
// KubeSchedulerConfiguration) as a generic map, for tests and benchmarks that point it at their own
// control plane.
func DocumentedSchedulerConfig() (map[string]any, error) {
	return localproc.DocumentedSchedulerConfig(RepoRoot())
}

// WithoutEnqueueWait sets the HyperTopology args' waitForEnqueue to false in a scheduler
// configuration from DocumentedSchedulerConfig, for suites that run the scheduler without a
// PodGroup lifecycle controller: their gangs are placed as soon as their pods exist.
func WithoutEnqueueWait(conf map[string]any) error {
	profiles, _ := conf["profiles"].([]any)
	for _, pr := range profiles {
		profile, _ := pr.(map[string]any)
		pcs, _ := profile["pluginConfig"].([]any)
		for _, pc := range pcs {
			entry, _ := pc.(map[string]any)
			if entry["name"] != "HyperTopology" {
				continue
			}
			a, _ := entry["args"].(map[string]any)
			if a == nil {
				a = map[string]any{}
			}
			a["waitForEnqueue"] = false
			entry["args"] = a
			return nil
		}
	}
	return fmt.Errorf("the scheduler configuration has no HyperTopology pluginConfig")
}

// StockSchedulerConfig is a KubeSchedulerConfiguration with kube-scheduler's defaults: one profile,
// default-scheduler, and leader election off (the comparison point of the scheduler benchmarks).
func StockSchedulerConfig() map[string]any {
	return map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
		"leaderElection": map[string]any{"leaderElect": false},
		"profiles":       []any{map[string]any{"schedulerName": "default-scheduler"}},
	}
}
