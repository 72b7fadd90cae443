package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
)

// With --discover, the label source over the kwok nodes' labels gives exactly the fixed sample tree
// (names, tiers, tier names, members), so everything that runs on the sample runs on it too.
func TestDiscoveryConfigGivesTheSampleTree(t *testing.T) {
	for _, n := range []int{1, 16, 37} {
		topo, err := buildTopology(n)
		require.NoError(t, err)
		file, err := config.Parse([]byte(discoveryConfig()))
		require.NoError(t, err)
		require.Len(t, file.Enabled(), 1)
		types, err := label.ParseConfig(file.Enabled()[0].Config)
		require.NoError(t, err)
		nodes := make([]*corev1.Node, 0, len(topo.Nodes))
		for _, fn := range topo.Nodes {
			nodes = append(nodes, nodeObject(fn))
		}
		groups, err := label.GroupNodes(types, nodes)
		require.NoError(t, err)
		discovered, err := hypernode.Build(discoverySource, groups, nil)
		require.NoError(t, err)
		var sample []*topologyv1alpha1.HyperNode
		for _, g := range topo.groups() {
			sample = append(sample, hyperNodeObject(g))
		}
		assert.Equal(t, hypernodetest.Render(sample), hypernodetest.Render(discovered), "%d nodes", n)
	}
}
