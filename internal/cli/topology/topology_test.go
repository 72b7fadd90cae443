package topology_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/topology"
	"github.com/hyperbatch/hyperbatch/internal/placementsvg"
)

// The recorded cluster: 16 nodes of 8 GPUs and 32 CPUs in 4 leaves, 2 spines and a top. Gangs
// default/placed (2 pods × 8 GPUs, 4 CPUs) and ml/cap-a (2 × 8 GPUs, 2 CPUs) fill leaf-0.
func TestRecordedCluster(t *testing.T) {
	r := topology.Build(clitest.Recorded(t, "localcluster.yaml"), topology.Options{Gang: "default/placed"})
	require.Empty(t, r.Invalid)
	var names []string
	byName := map[string]topology.Domain{}
	for _, d := range r.Domains {
		names = append(names, d.Name)
		byName[d.Name] = d
	}
	assert.Equal(t, []string{"top", "spine-0", "leaf-0", "leaf-1", "spine-1", "leaf-2", "leaf-3"}, names)
	leaf0 := byName["leaf-0"]
	assert.Equal(t, 1, leaf0.Tier)
	assert.Equal(t, "spine-0", leaf0.Parent)
	assert.Equal(t, []string{"kwok-node-00", "kwok-node-01", "kwok-node-02", "kwok-node-03"}, leaf0.Nodes)
	assert.Equal(t, int64(32), leaf0.AcceleratorsAllocatable)
	assert.Equal(t, int64(0), leaf0.AcceleratorsFree, "4 pods of 8 GPUs")
	assert.Equal(t, int64(128000), leaf0.CPUAllocatableMilli)
	assert.Equal(t, int64(128000-2*4000-2*2000), leaf0.CPUFreeMilli)
	assert.Equal(t, []string{"default/placed", "ml/cap-a"}, leaf0.Gangs)
	assert.True(t, leaf0.Highlight)
	assert.Equal(t, int64(128), byName["top"].AcceleratorsAllocatable)
	assert.Equal(t, int64(96), byName["top"].AcceleratorsFree)
	assert.Equal(t, topology.NoSource, byName["top"].Source, "make run writes the sample tree itself")
	require.NotNil(t, r.Highlight)
	assert.True(t, r.Highlight.Placed)
	assert.Equal(t, "leaf-0", r.Highlight.Domain)
	for _, f := range []output.Format{output.Table, output.JSON} {
		clitest.Render(t, "topology", f, r)
	}
}

// The picture is well-formed XML and names every HyperNode of the lowest tier, every row's
// HyperNode and every gang; the highlighted leaf is outlined.
func TestSVG(t *testing.T) {
	r := topology.Build(clitest.Recorded(t, "localcluster.yaml"), topology.Options{Gang: "ml/cap-a"})
	pic := r.Picture()
	svg := pic.SVG()
	list, err := placementsvg.Titles([]byte(svg))
	require.NoError(t, err)
	titles := "\n" + strings.Join(list, "\n") + "\n"
	for _, d := range r.Domains {
		if d.Tier == 1 {
			assert.Contains(t, titles, "\n"+d.Name+"\n", "the grey block of %s", d.Name)
		}
	}
	for _, row := range []string{">spine-0<", ">spine-1<"} {
		assert.Contains(t, svg, row)
	}
	for _, g := range r.Gangs {
		assert.Contains(t, svg, ">"+g.Name+" (", "legend entry of %s", g.Name)
	}
	for _, g := range r.Gangs {
		for n := range g.Nodes {
			assert.Contains(t, titles, "\n"+g.Name+" on "+n+"\n", "the cells of %s on %s", g.Name, n)
		}
	}
	assert.Contains(t, svg, `stroke="#d00000" stroke-width="2"><title>leaf-0</title>`)
	clitest.Golden(t, "topology.svg", []byte(svg))
}

// A gang that is not placed and for which no candidate is known is said so.
func TestGangNotPlaced(t *testing.T) {
	r := topology.Build(clitest.Recorded(t, "localcluster.yaml"), topology.Options{Gang: "ml/cap-b"})
	require.NotNil(t, r.Highlight)
	assert.False(t, r.Highlight.Placed)
	assert.Empty(t, r.Highlight.Domain)
	for _, d := range r.Domains {
		assert.False(t, d.Highlight, d.Name)
	}
}
