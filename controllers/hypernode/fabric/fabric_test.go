package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
)

func TestNormalizeGUID(t *testing.T) {
	g, err := fabric.NormalizeGUID("0x2C90300A0B0C0")
	require.NoError(t, err)
	assert.Equal(t, "0002c90300a0b0c0", g)
	_, err = fabric.NormalizeGUID("xyz")
	assert.ErrorContains(t, err, "not a 64-bit hex number")
	_, err = fabric.NormalizeGUID("0x00000000000000001")
	assert.Error(t, err)
}

// A host on two leaves joins them into one tier-1 group; hosts without a Node are not members, and
// a switch group with no member below is dropped by Build.
func TestGroupsJoinLeavesThatShareAHost(t *testing.T) {
	g := fabric.NewGraph()
	for _, s := range []string{"a1", "a2", "b1", "sp"} {
		g.Add(s, fabric.Switch, s)
	}
	for _, h := range []string{"h1", "h2", "ghost"} {
		g.Add(h, fabric.Host, h)
	}
	g.Link("a1", "h1")
	g.Link("a2", "h1")
	g.Link("b1", "h2")
	g.Link("b1", "ghost")
	for _, l := range []string{"a1", "a2", "b1"} {
		g.Link(l, "sp")
	}
	nodeOf := func(d *fabric.Device) (string, bool) { return d.Name, d.Name != "ghost" }
	groups := g.Groups(nodeOf)
	hns, err := hypernode.Build("test", groups, nil)
	require.NoError(t, err)
	assert.Equal(t, "2 spine spine-sp: leaf-a1 leaf-b1\n1 leaf leaf-a1: h1\n1 leaf leaf-b1: h2\n", hypernodetest.Render(hns))
}
