// Command stages prints kwok's default Stage set, the one kwokctl writes into a cluster's kwok
// configuration (sigs.k8s.io/kwok/pkg/kwokctl/runtime, getDefaultNodeStages with node leases on, and
// getDefaultPodStages): node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete and
// pod-delete. Since v0.8.0 the kwok binary has no built-in stages ("no stages found"); hack/tools.sh
// writes this output to bin/kwok-stages.yaml, which the local clusters pass to kwok with --config.
// The stages are kwok's own files, embedded in its kustomize/stage packages at the pinned version.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeatwithlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeatwithlease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		if strings.TrimSpace(d) == "" {
			fmt.Fprintf(os.Stderr, "kwok stage %d is empty in this kwok version\n", i)
			os.Exit(1)
		}
		docs[i] = strings.TrimRight(d, "\n") + "\n"
	}
	if _, err := fmt.Print(strings.Join(docs, "---\n")); err != nil {
		fmt.Fprintf(os.Stderr, "writing the stages: %v\n", err)
		os.Exit(1)
	}
}
