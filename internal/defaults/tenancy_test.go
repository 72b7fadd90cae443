package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func TestClusterRefusal(t *testing.T) {
	pols := mustPolicies(t, *builders.TeamA().AllowedClusters("a", "b").Obj())
	assert.Nil(t, ClusterRefusal([]string{"a"}, nsA, pols))
	assert.Nil(t, ClusterRefusal([]string{"b", "a"}, nsA, pols))
	ref := ClusterRefusal([]string{"a", "c", "d", "c"}, nsA, pols)
	require.NotNil(t, ref)
	assert.Equal(t, `clusters "c", "d" are not allowed in namespace "a": WorkloadPolicy "team-a" allows only "a", "b"`, ref.Error())
	ref = ClusterRefusal(nil, nsA, pols)
	require.NotNil(t, ref, "no clusters means every cluster")
	assert.Contains(t, ref.Error(), "naming no clusters (which propagates to every cluster) is not allowed")
	// Not governed, or no allowedClusters: anything goes.
	assert.Nil(t, ClusterRefusal(nil, Namespace{Name: "free"}, pols))
	assert.Nil(t, ClusterRefusal([]string{"z"}, nsA, mustPolicies(t, teamA())))
}

// TestInvalidPolicyFailsClosed: a policy whose namespaceSelector cannot be parsed defaults nothing,
// but its allowed lists apply to every namespace no valid policy ranked above it governs.
func TestInvalidPolicyFailsClosed(t *testing.T) {
	broken := *builders.MakePolicy("broken").Weight(20).InvalidSelector().AllowedQueues("gpu").AllowedClusters("c1").Queue("gpu").Obj()
	low := *builders.MakePolicy("low").Weight(1).InvalidSelector().AllowedQueues("cpu").Obj()
	pols, err := NewPolicies([]hbv1.WorkloadPolicy{teamA(), broken, low})
	require.Error(t, err, "the invalid selectors are reported")
	assert.Equal(t, []string{"broken", "low"}, pols.InvalidPolicies())
	assert.Equal(t, "team-a", pols.MatchNamespace(nsA).Name, "an invalid policy governs nothing (it defaults nothing)")

	// nsA is governed by team-a (weight 10); broken ranks above it, low below it.
	ref := QueueRefusal("team-a", nsA, pols)
	require.NotNil(t, ref)
	assert.Equal(t, "broken", ref.Policy)
	assert.True(t, ref.PolicyInvalid)
	assert.Contains(t, ref.Error(), `queue "team-a" is not allowed in namespace "a": WorkloadPolicy "broken" allows only "gpu" (its namespaceSelector is invalid`)
	ref = QueueRefusal("gpu", nsA, pols)
	require.NotNil(t, ref, "gpu passes broken but not the governing team-a")
	assert.Equal(t, "team-a", ref.Policy)
	allowed, pol, _ := AllowedQueue("gpu", nsA, pols)
	assert.False(t, allowed)
	assert.Equal(t, "team-a", pol)

	// A namespace no valid policy governs: every invalid policy binds it.
	free := Namespace{Name: "free"}
	assert.Equal(t, "broken", QueueRefusal("cpu", free, pols).Policy)
	assert.Equal(t, "low", QueueRefusal("gpu", free, pols).Policy)
	assert.NotNil(t, ClusterRefusal([]string{"c2"}, free, pols))
	assert.Nil(t, ClusterRefusal([]string{"c1"}, free, pols))

	// Below the governing policy, an invalid one does not bind.
	onlyLow, _ := NewPolicies([]hbv1.WorkloadPolicy{teamA(), low})
	assert.Nil(t, QueueRefusal("team-a", nsA, onlyLow))
}
