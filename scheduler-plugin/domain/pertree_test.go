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
			wantErr: []string{`only HyperNodes named "nvl-rack" and those below one are allowed`, "no tier-1 HyperNode has room for 24 pods (the best: nvl-rack-0 has room for 16 of them)"}},
		{name: "nvl-rack with both NVL racks busy waits instead of using an H100 leaf",
			setup: func(c *cluster) {
				for _, n := range []string{"gb-0-0", "gb-1-0"} {
					c.use(n, rl("1", 8))
				}
			},
			limit: named("nvl-rack"), pods: 9, wantErr: []string{"no tier-1 HyperNode has room for 9 pods (the best: nvl-rack-0 has room for 8 of them)"}},
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

// A gang that fits no single child of its domain fills the fewest children, best fit first, down to
// the leaves, and is pinned to their nodes only.
func TestChooseSpillsIntoFewestLeaves(t *testing.T) {
	onePerGPU := rl("1", 1) // racks hold 32, spines 64, core 128
	useRack := func(c *cluster, rack, gpus int) {
		for i := 0; gpus > 0; i++ {
			g := min(gpus, 8)
			c.use(fmt.Sprintf("n%d", rack*4+i), rl("1", int64(g)))
			gpus -= g
		}
	}
	for _, tc := range []struct {
		name       string
		setup      func(*cluster)
		pods       int
		limit      gang.Limit
		placed     []string
		want       string
		wantLeaves []string
	}{
		{name: "72 pods: one whole spine, then the best-fit rack of the other (3 racks, not 4)",
			pods: 72, limit: hard(3), want: "core", wantLeaves: []string{"rack-0", "rack-1", "rack-2"}},
		{name: "the last 8 pods go to the rack with exactly 8 free, not a free rack",
			setup: func(c *cluster) { useRack(c, 3, 24) },
			pods:  72, limit: hard(3), want: "core", wantLeaves: []string{"rack-0", "rack-1", "rack-3"}},
		{name: "a spine's overflow: the roomy rack whole, the rest in the tight one",
			setup: func(c *cluster) { useRack(c, 0, 22) }, // rack-0: 10 free, rack-1: 32
			pods:  40, limit: hard(2), want: "spine-0", wantLeaves: []string{"rack-0", "rack-1"}},
		{name: "the rack holding placed pods is filled first",
			setup: func(c *cluster) { useRack(c, 2, 8) }, // rack-2: 24 free, rack-3: 32
			pods:  40, limit: hard(2), placed: []string{"n12"}, want: "spine-1", wantLeaves: []string{"rack-2", "rack-3"}},
		{name: "fits one rack: no spilling", pods: 30, limit: hard(2), want: "rack-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster()
			if tc.setup != nil {
				tc.setup(c)
			}
			req := Request{Demand: Demand{Pods: pods(tc.pods, onePerGPU)}, Topology: true, Limit: tc.limit, Placed: tc.placed}
			var got *Choice
			var err error
			c.cache.Read(func(tr topology.Tree) {
				got, err = Choose(tr, c.nodeInfos(), req)
				require.NoError(t, err)
				assert.Equal(t, tc.want, got.HyperNode)
				assert.Equal(t, tc.wantLeaves, got.Spilled)
				want := 0
				for _, l := range tc.wantLeaves {
					want += tr.Get(l).NodeCount()
				}
				if len(tc.wantLeaves) > 0 {
					assert.Equal(t, want, got.Nodes.Len(), "pinned to the chosen leaves' nodes only")
				}
			})
		})
	}
}
