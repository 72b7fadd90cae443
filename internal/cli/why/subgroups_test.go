package why_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// A gang with sub-groups that fit nowhere whole: why says which sub-groups fit where (per gang domain
// how many it holds, and the rooms of the HyperNodes their limit allows) and what would fit (fewer
// sub-groups, or the room one more needs). The numbers are the annotation hyperbatch-scheduler writes
// (domain.ChooseGroups, TestChooseGroupsPlacementNumbers; TestSubGroupsOnFragmentedFabric reads it
// from a real PodGroup), put on the recorded gang.
func TestSubGroupsFitWhere(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	pg.Spec.MinMember = 6
	p := &gangcontract.Placement{Version: gangcontract.PlacementVersion, Time: "2026-11-24T22:15:00Z", Limit: "highestTierAllowed=2",
		Need: gangcontract.Amounts{Pods: 6, Resources: map[string]string{"cpu": "24", "nvidia.com/gpu": "48"}},
		Tiers: []gangcontract.TierPlacement{
			{Tier: 1, Allowed: true, Candidates: 4, Best: "leaf-1", BestRoom: 4, Nodes: 4, EligibleNodes: 4, Binding: "nvidia.com/gpu",
				BestFree: gangcontract.Amounts{Pods: 440, Resources: map[string]string{"cpu": "128", "nvidia.com/gpu": "32"}}},
			{Tier: 2, Allowed: true, Candidates: 2, Evaluated: 1, Best: "spine-1", BestRoom: 6, Nodes: 8, EligibleNodes: 8, Binding: gangcontract.BindingSubGroups,
				BestFree: gangcontract.Amounts{Pods: 880, Resources: map[string]string{"cpu": "256", "nvidia.com/gpu": "48"}}},
		},
		Message: "gang default/too-big (highestTierAllowed=2) waits: 6 more pods needing 24 cpu, 48 nvidia.com/gpu in 2 required sub-group(s): ...",
		SubGroups: &gangcontract.SubGroupPlacement{Required: 2, Size: 3, Limit: "highestTierAllowed=1", Holds: 1, Domains: []gangcontract.SubGroupDomain{
			{HyperNode: "spine-1", Tier: 2, Holds: 1, Rooms: []gangcontract.NamedRoom{{Name: "leaf-2", Room: 4}, {Name: "leaf-3", Room: 2}}}}},
	}
	v, err := p.Encode()
	require.NoError(t, err)
	pg.Annotations[gangcontract.PlacementAnnotation] = v
	r := why.Build(s, pg, owner, now(t))
	require.True(t, r.Waits())
	assert.Contains(t, r.Changes, "fewer sub-groups: spine-1 holds 1 of the 2 required sub-groups of 3 pods whole (minSubGroups at most 1, and minMember 3 instead of 6)")
	assert.Contains(t, r.Changes, "more room: 1 more pod free in leaf-3 (highestTierAllowed=1) would hold one more sub-group of 3 pods inside spine-1")
	var b strings.Builder
	require.NoError(t, output.Print(&b, output.Table, r))
	assert.Contains(t, b.String(), "Sub-groups: 2 required, 3 pods each, each inside one HyperNode of highestTierAllowed=1; the most one allowed domain holds whole: 1.")
	clitest.Render(t, "why-subgroups", output.Table, r)
}
