// Command scheduler is kube-scheduler with hyperbatch's plugins registered. Run it as a second
// scheduler whose profile is named hyperbatch-scheduler (see docs/scheduler-config.yaml).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/registry"
)

func main() {
	command := app.NewSchedulerCommand(registry.Options()...)
	os.Exit(cli.Run(command))
}
