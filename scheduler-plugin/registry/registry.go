// Package registry lists the out-of-tree plugins hyperbatch adds to kube-scheduler. cmd/scheduler and
// the in-process test schedulers take their options from here, so both always run the same plugins.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/hypertopology"
)

// Plugins maps plugin names to their factories. Importing this package also registers the plugins'
// typed args (HyperTopologyArgs) in kube-scheduler's configuration scheme.
var Plugins = frameworkruntime.Registry{
	hypertopology.Name: hypertopology.New,
}

// Options returns kube-scheduler command options that register every plugin in Plugins.
func Options() []app.Option {
	opts := make([]app.Option, 0, len(Plugins))
	for name, factory := range Plugins {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}
