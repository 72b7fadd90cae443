package domain

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// mixedFabric is a GB200-like NVL tree beside an H100 tree, 8 GPUs per node:
//
//	NVL:  nvl-rack-0, nvl-rack-1 (tier 1, "nvl-rack", 2 nodes each) → nvl-block-0 (tier 2, "nvl-block")
//	H100: h100-leaf-0..3 (tier 1, "leaf", 2 nodes each) → h100-spine-0 (leaves 0,1), h100-spine-1
//	      (leaves 2,3) (tier 2, "spine") → h100-core (tier 3, "core")
//
// The H100 names sort first, so wherever a name resolved to a cluster-wide tier number, best fit's
// tie-break would pick the H100 domain: the tests below fail that way.
func mixedFabric() *cluster {
	c := &cluster{cache: topology.NewCache(), infos: map[string]*framework.NodeInfo{}}
	add := func(n string) topologyv1alpha1.MemberSpec {
		ni := framework.NewNodeInfo()
		ni.SetNode(gpuNode(n))
		c.infos[n] = ni
		c.order = append(c.order, n)
		c.cache.AddOrUpdateNode(gpuNode(n))
		return member(topologyv1alpha1.MemberTypeNode, n)
	}
	hn := func(name string, tier int, tierName string, ms ...topologyv1alpha1.MemberSpec) {
		c.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, TierName: tierName, Members: ms}})
	}
	child := func(n string) topologyv1alpha1.MemberSpec { return member(topologyv1alpha1.MemberTypeHyperNode, n) }
	for r := 0; r < 2; r++ {
		hn(fmt.Sprintf("nvl-rack-%d", r), 1, "nvl-rack", add(fmt.Sprintf("gb-%d-0", r)), add(fmt.Sprintf("gb-%d-1", r)))
	}
	hn("nvl-block-0", 2, "nvl-block", child("nvl-rack-0"), child("nvl-rack-1"))
	for l := 0; l < 4; l++ {
		hn(fmt.Sprintf("h100-leaf-%d", l), 1, "leaf", add(fmt.Sprintf("h-%d-0", l)), add(fmt.Sprintf("h-%d-1", l)))
	}
	hn("h100-spine-0", 2, "spine", child("h100-leaf-0"), child("h100-leaf-1"))
	hn("h100-spine-1", 2, "spine", child("h100-leaf-2"), child("h100-leaf-3"))
	hn("h100-core", 3, "core", child("h100-spine-0"), child("h100-spine-1"))
	return c
}

func named(name string) gang.Limit {
	return gang.Limit{Hard: true, TierName: name, Describe: "highestTierName=" + name}
}

// highestTierName resolves per tree: the gang stays inside a HyperNode of that name or below one,
// and a tree without the name is never used.
func TestChoosePerTreeTierName(t *testing.T) {
	onePerGPU := rl("1", 1)
	for _, tc := range []struct {
		name    string
		setup   func(*cluster)
		limit   gang.Limit
		pods    int
		placed  []string
		want    string
		wantErr []string
	}{
		{name: "nvl-rack: an NVL rack, not the H100 leaf of the same tier", limit: named("nvl-rack"), pods: 16, want: "nvl-rack-0"},
		{name: "nvl-rack: a small gang goes to an NVL rack too", limit: named("nvl-rack"), pods: 4, want: "nvl-rack-0"},
		{name: "nvl-block: two NVL racks", limit: named("nvl-block"), pods: 32, want: "nvl-block-0"},
		{name: "nvl-block still prefers one rack below it", limit: named("nvl-block"), pods: 16, want: "nvl-rack-0"},
		{name: "leaf: an H100 leaf", limit: named("leaf"), pods: 16, want: "h100-leaf-0"},
		{name: "spine: an H100 spine, not the NVL block of the same tier", limit: named("spine"), pods: 32, want: "h100-spine-0"},
		{name: "core: the H100 core", limit: named("core"), pods: 64, want: "h100-core"},
		{name: "nvl-rack too big for any NVL rack waits; the H100 tree has room but is never used",
			limit: named("nvl-rack"), pods: 24,
			wantErr: []string{`only HyperNodes named "nvl-rack" and those below one are allowed`, "no tier-1 HyperNode has room (best nvl-rack-0: 16)"}},
		{name: "nvl-rack with both NVL racks busy waits instead of using an H100 leaf",
			setup: func(c *cluster) {
				for _, n := range []string{"gb-0-0", "gb-1-0"} {
					c.use(n, rl("1", 8))
				}
			},
			limit: named("nvl-rack"), pods: 9, wantErr: []string{"no tier-1 HyperNode has room (best nvl-rack-0: 8)"}},
		{name: "leaf never reaches the NVL tree", limit: named("leaf"), pods: 17, wantErr: []string{`named "leaf"`}},
		{name: "placed pods in an NVL rack stay there", limit: named("nvl-block"), pods: 2, placed: []string{"gb-1-0"}, want: "nvl-rack-1"},
		{name: "placed pods in the H100 tree cannot satisfy nvl-rack", limit: named("nvl-rack"), pods: 2, placed: []string{"h-0-0"},
			wantErr: []string{"placed pods already span HyperNode h100-leaf-0 (tier 1), outside highestTierName=nvl-rack"}},
		{name: "hard without a tier: the lowest single HyperNode that fits", limit: gang.Limit{Hard: true, AnyHyperNode: true, Describe: "hard"}, pods: 40, want: "h100-core"},
		{name: "hard without a tier never spans trees (the root)", limit: gang.Limit{Hard: true, AnyHyperNode: true, Describe: "hard"}, pods: 65,
			wantErr: []string{"the cluster root is not allowed (mode hard without a tier bound"}},
		{name: "numeric tier 1 (global, as in Volcano) may use either tree", limit: hard(1), pods: 16, want: "h100-leaf-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mixedFabric()
			if tc.setup != nil {
				tc.setup(c)
			}
			req := Request{Demand: Demand{Pods: pods(tc.pods, onePerGPU)}, Topology: true, Limit: tc.limit, Placed: tc.placed}
			var got *Choice
			var err error
			c.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, c.nodeInfos(), req) })
			if len(tc.wantErr) > 0 {
				require.Error(t, err, "chose %v", got)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.HyperNode)
		})
	}
}
