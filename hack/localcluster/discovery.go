package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// discoverySource is the discovery source the local cluster configures with --discover.
const discoverySource = "label"

// discoveryConfig is the manager's --discovery-config with --discover: Volcano's label source over
// the kwok nodes' topology labels (top, spine, leaf), which gives the same tree the fixed sample has.
func discoveryConfig() string {
	return fmt.Sprintf(`# Written by hack/localcluster up --discover (docs/discovery.md).
networkTopologyDiscovery:
  - source: %s
    enabled: true
    interval: 10m
    config:
      networkTopologyTypes:
        local:
          - nodeLabel: %s
          - nodeLabel: %s
          - nodeLabel: %s
          - nodeLabel: kubernetes.io/hostname
`, discoverySource, labelTop, labelSpine, labelLeaf)
}

// writeDiscoveryConfig writes the configuration into the cluster's directory and returns its path.
func writeDiscoveryConfig(cl localproc.Cluster) (string, error) {
	path := filepath.Join(cl.Dir, "discovery.yaml")
	if err := os.WriteFile(path, []byte(discoveryConfig()), 0o644); err != nil {
		return "", fmt.Errorf("writing the discovery configuration: %w", err)
	}
	return path, nil
}

// waitDiscoveredTree waits until the manager's discovery has written every HyperNode of t.
func (k *kube) waitDiscoveredTree(ctx context.Context, t topology) error {
	begin := time.Now()
	want := t.groups()
	timeout := 60*time.Second + time.Duration(len(want))*20*time.Millisecond
	for {
		var l topologyv1alpha1.HyperNodeList
		if err := k.c.List(ctx, &l, client.MatchingLabels{"volcano.sh/network-topology-source": discoverySource}); err != nil {
			return fmt.Errorf("listing discovered HyperNodes: %w", err)
		}
		have := map[string]int{}
		for _, hn := range l.Items {
			have[hn.Name] = len(hn.Spec.Members)
		}
		missing := 0
		for _, g := range want {
			if have[g.Name] != len(g.Members) {
				missing++
			}
		}
		if missing == 0 {
			step("discovery built %d HyperNodes from the node labels (%s)", len(want), since(begin))
			return nil
		}
		if time.Since(begin) > timeout {
			return fmt.Errorf("discovery built %d of %d HyperNodes within %s; see the manager's log.\n%s",
				len(want)-missing, len(want), timeout.Round(time.Second), logTail(k.cl.LogFile("manager")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
