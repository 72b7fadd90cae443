package scheduler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The peers benchmark's own bookkeeping: tree shapes, tiers and the workload's hard limits.
func TestPeerTrees(t *testing.T) {
	d := domainTree()
	assert.Equal(t, totalHyper, d.hyperNodes(), "the domain benchmark's 9,600 HyperNodes")
	assert.Equal(t, []int{1, 3, 4}, []int{d.emptyTier(8), d.emptyTier(32), d.emptyTier(128)})
	assert.Equal(t, 1, d.lowestTier([]int{5, 5}))
	assert.Equal(t, 2, d.lowestTier([]int{4, 5}))
	assert.Equal(t, 3, d.lowestTier([]int{0, 11}))
	assert.Equal(t, 5, d.lowestTier([]int{0, 60}), "no single tier-4 HyperNode: the root")
	assert.Equal(t, 5, d.lowestTier([]int{0, -1}))
	assert.Equal(t, 17, d.index(nodeName(17)))
	assert.Equal(t, -1, d.index("tp-node-00017"))

	s := threeTier(1000)
	assert.Equal(t, 111, s.hyperNodes())
	assert.Equal(t, []int{1, 1, 2}, []int{s.emptyTier(8), s.emptyTier(32), s.emptyTier(128)})
	assert.Equal(t, 3, s.lowestTier([]int{0, 100}))
	assert.Equal(t, "tp-rack-3", s.hyperName(1, 3))

	w := peerWorkload(s)
	require.Len(t, w, 3*peerRounds)
	soft := 0
	for _, g := range w {
		if g.soft {
			soft++
		}
	}
	assert.Equal(t, len(w)/peerSoftEvery, soft)
}

func TestPlacementSVG(t *testing.T) {
	tr := threeTier(100)
	gangs := peerWorkload(tr)
	r := peerRun{gangs: len(gangs), nodesOf: map[string][]int{gangs[0].name: {0, 0, 1}}, leaves: map[int][2]int{}}
	svg := placementSVG(tr, []peerAgg{{runs: []peerRun{r}}, {}, {}})
	assert.True(t, strings.HasPrefix(svg, "<svg "))
	assert.Contains(t, svg, gangs[0].name+" on tp-node-00000")
	assert.Equal(t, 2, strings.Count(svg, "<title>"), "one rect per node a gang uses")
}
