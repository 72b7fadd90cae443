package domain

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

func unsatisfiable(t *testing.T, c *cluster, req Request) *gangcontract.Placement {
	t.Helper()
	var p *gangcontract.Placement
	c.cache.Read(func(tr topology.Tree) {
		_, err := Choose(tr, c.nodeInfos(), req)
		var u *Unsatisfiable
		require.True(t, errors.As(err, &u), "want Unsatisfiable, got %v", err)
		require.NotNil(t, u.Placement, u.Msg)
		p = u.Placement
	})
	return p
}

// 5 pods of 8 GPUs under highestTierAllowed=1, racks of 4 nodes with 8 GPUs: the best rack holds 4
// (GPUs bind); a tier-2 spine holds all 5; so: 4 pods, or tier 2.
func TestPlacementTierLimit(t *testing.T) {
	c := newCluster()
	c.use("n0", rl("1", 8)) // rack-0 has room for 3
	p := unsatisfiable(t, c, Request{Demand: Demand{Pods: pods(5, rl("4", 8))}, Topology: true, Limit: hard(1)})
	assert.Equal(t, gangcontract.Amounts{Pods: 5, Resources: map[string]string{"cpu": "20", "nvidia.com/gpu": "40"}}, p.Need)
	require.Len(t, p.Tiers, 3)
	t1 := p.Tiers[0]
	assert.Equal(t, gangcontract.TierPlacement{Tier: 1, Allowed: true, Candidates: 4, Evaluated: 0, Best: "rack-1", BestRoom: 4,
		BestFree: gangcontract.Amounts{Pods: 440, Resources: map[string]string{"cpu": "256", "nvidia.com/gpu": "32"}}, Nodes: 4, EligibleNodes: 4,
		Binding: "nvidia.com/gpu"}, t1)
	assert.Equal(t, gangcontract.TierPlacement{Tier: 2, Allowed: false, Candidates: 2, Best: "spine-1", BestRoom: 8,
		BestFree: gangcontract.Amounts{Pods: 880, Resources: map[string]string{"cpu": "512", "nvidia.com/gpu": "64"}}, Nodes: 8, EligibleNodes: 8,
		Binding: gangcontract.BindingTierLimit}, p.Tiers[1])
	assert.False(t, p.Tiers[2].Allowed)
	assert.Equal(t, []gangcontract.Suggestion{{Kind: gangcontract.SuggestFewerPods, Value: 4, Domain: "rack-1"},
		{Kind: gangcontract.SuggestHigherTier, Value: 2, Domain: "spine-1"}}, p.Suggestions)
}

// CPU binds when the pods ask for more CPU than the racks have free, and node constraints when
// no node of the domain may run them.
func TestPlacementBinding(t *testing.T) {
	c := newCluster()
	p := unsatisfiable(t, c, Request{Demand: Demand{Pods: pods(5, rl("60", 1))}, Topology: true, Limit: hard(1)})
	assert.Equal(t, "cpu", p.Tiers[0].Binding, "4 nodes × 64 cpu hold 4 pods of 60 cpu")
	assert.Equal(t, int64(4), p.Tiers[0].BestRoom)

	// Only the nodes outside every HyperNode are eligible (say, the only ones with the pods' label).
	outside := func(n *corev1.Node) bool { return strings.HasPrefix(n.Name, "out-") }
	p = unsatisfiable(t, newCluster(), Request{Demand: Demand{Pods: pods(2, rl("1", 1))}, Topology: true, Limit: hard(1), Eligible: outside})
	assert.Equal(t, gangcontract.BindingNodeConstraints, p.Tiers[0].Binding)
	assert.Equal(t, 0, p.Tiers[0].EligibleNodes)
	assert.Equal(t, 4, p.Tiers[0].Nodes)
	assert.Empty(t, p.Suggestions)
}

func TestPlacementEncoding(t *testing.T) {
	p := unsatisfiable(t, newCluster(), Request{Demand: Demand{Pods: pods(5, rl("4", 8))}, Topology: true, Limit: hard(1)})
	v, err := p.Encode()
	require.NoError(t, err)
	back, err := gangcontract.ParsePlacement(v)
	require.NoError(t, err)
	assert.Equal(t, p, back)
	_, err = gangcontract.ParsePlacement(`{"v":2}`)
	assert.ErrorContains(t, err, "format version 2")
}
