// Package schedulerenv runs the real hyperbatch-scheduler (kube-scheduler's app.Setup/app.Run with
// hyperbatch's plugin registry and docs/scheduler-config.yaml as --config) in the test process,
// against a test control plane. It is its own package so that only the tests that need a scheduler
// link kube-scheduler. It is the one in-process scheduler of the integration suites and benchmarks.
package schedulerenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/registry"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// SchedulerName is the profile docs/scheduler-config.yaml defines.
const SchedulerName = "hyperbatch-scheduler"

// Options tune Run.
type Options struct {
	// Config is the KubeSchedulerConfiguration (as a generic map); nil: docs/scheduler-config.yaml.
	// Its clientConnection.kubeconfig is pointed at the test control plane; other clientConnection
	// fields (qps, burst) are kept.
	Config map[string]any
	// WithoutEnqueueWait turns the HyperTopology args' waitForEnqueue off (framework.WithoutEnqueueWait),
	// for suites that run no PodGroup lifecycle controller: gangs are placed once their pods exist.
	WithoutEnqueueWait bool
	// Profile must be among the configuration's profiles; default SchedulerName.
	Profile string
	// ConfigName is the file name of the written configuration in dir; default scheduler-config.yaml.
	ConfigName string
	// FeatureGates are set before the scheduler is built, as its --feature-gates flag would; nil:
	// hyperbatch-scheduler's shipped gates (localproc.SchedulerFeatureGates). The gates are the
	// process's: a Run for another scheduler (the stock profile) names the same gates at the values it
	// wants.
	FeatureGates map[string]bool
}

// Start runs the scheduler with docs/scheduler-config.yaml until ctx is cancelled; dir holds its
// kubeconfig and config. The returned channel closes when the scheduler has stopped.
func Start(ctx context.Context, cfg *rest.Config, dir string) (<-chan struct{}, error) {
	_, done, err := Run(ctx, cfg, dir, Options{})
	return done, err
}

// Run starts the scheduler as cmd/scheduler does (--config written into dir, as hack/localcluster
// does) and returns it and a channel that closes when it has stopped after ctx is cancelled.
func Run(ctx context.Context, cfg *rest.Config, dir string, o Options) (*kubescheduler.Scheduler, <-chan struct{}, error) {
	if o.Profile == "" {
		o.Profile = SchedulerName
	}
	if o.ConfigName == "" {
		o.ConfigName = "scheduler-config.yaml"
	}
	kubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
	if err := framework.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, nil, err
	}
	conf := o.Config
	if conf == nil {
		var err error
		if conf, err = framework.DocumentedSchedulerConfig(); err != nil {
			return nil, nil, err
		}
	}
	if o.WithoutEnqueueWait {
		if err := framework.WithoutEnqueueWait(conf); err != nil {
			return nil, nil, err
		}
	}
	configPath := filepath.Join(dir, o.ConfigName)
	if err := localproc.WriteSchedulerConfig(conf, kubeconfig, configPath); err != nil {
		return nil, nil, err
	}

	opts := options.NewOptions()
	opts.ConfigFile = configPath
	opts.SecureServing.BindPort = 0 // no HTTPS endpoint in tests
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, nil, err
	}
	if o.FeatureGates == nil {
		o.FeatureGates = localproc.SchedulerFeatureGateMap()
	}
	if len(o.FeatureGates) > 0 {
		if err := feature.DefaultMutableFeatureGate.SetFromMap(o.FeatureGates); err != nil {
			return nil, nil, fmt.Errorf("scheduler feature gates: %w", err)
		}
	}
	cc, s, err := app.Setup(ctx, opts, registry.Options()...)
	if err != nil {
		return nil, nil, fmt.Errorf("scheduler setup: %w", err)
	}
	if s.Profiles[o.Profile] == nil {
		return nil, nil, fmt.Errorf("profile %s missing from the scheduler configuration", o.Profile)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := app.Run(ctx, cc, s); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "scheduler stopped: %v\n", err)
		}
	}()
	return s, done, nil
}
