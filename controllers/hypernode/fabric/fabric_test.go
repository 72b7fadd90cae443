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

// A switch with no host below it never becomes a HyperNode (issue 38): in a three-tier fabric, a
// leaf whose hosts are not in the capture (hl, cabled to one pod's spines) and a switch hanging
// only off it (hl2) are tiered by distance as core and tier4; they are left out, the real core (two
// pods below) is kept under its own name, and no leaf loses its parent.
func TestHostlessSwitchesAreNoTier(t *testing.T) {
	g := fabric.NewGraph()
	for _, s := range []string{"c1", "hl", "hl2", "pa1", "pa2", "pb1", "la1", "la2", "lb1"} {
		g.Add(s, fabric.Switch, s)
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		g.Add(h, fabric.Host, h)
	}
	g.Link("la1", "h1")
	g.Link("la2", "h2")
	g.Link("lb1", "h3")
	for _, l := range []string{"la1", "la2"} {
		g.Link(l, "pa1")
		g.Link(l, "pa2")
	}
	g.Link("lb1", "pb1")
	for _, p := range []string{"pa1", "pa2", "pb1"} {
		g.Link(p, "c1")
	}
	g.Link("hl", "pa1")
	g.Link("hl", "pa2")
	g.Link("hl2", "hl")
	nodeOf := func(d *fabric.Device) (string, bool) { return d.Name, true }
	hns, err := hypernode.Build("test", g.Groups(nodeOf), nil)
	require.NoError(t, err)
	assert.Equal(t, `3 core core-c1: spine-pa1 spine-pb1
2 spine spine-pa1: leaf-la1 leaf-la2
2 spine spine-pb1: leaf-lb1
1 leaf leaf-la1: h1
1 leaf leaf-la2: h2
1 leaf leaf-lb1: h3
`, hypernodetest.Render(hns))
}

// Two fabrics joined only by a host with HCAs in both: each is tiered and grouped on its own, and
// the host is a member where most of its cables are.
func TestFabricsStaySeparate(t *testing.T) {
	g := fabric.NewGraph()
	for _, s := range []string{"r1", "r2", "sp", "m1", "msp"} {
		g.Add(s, fabric.Switch, s)
	}
	for _, h := range []string{"gpu", "mgmt"} {
		g.Add(h, fabric.Host, h)
	}
	g.Link("r1", "gpu")
	g.Link("r2", "gpu")
	g.Link("m1", "gpu") // the compute node's management HCA
	g.Link("m1", "mgmt")
	g.Link("r1", "sp")
	g.Link("r2", "sp")
	g.Link("m1", "msp")
	nodeOf := func(d *fabric.Device) (string, bool) { return d.Name, true }
	hns, err := hypernode.Build("test", g.Groups(nodeOf), nil)
	require.NoError(t, err)
	assert.Equal(t, `2 spine spine-msp: leaf-m1
2 spine spine-sp: leaf-r1
1 leaf leaf-m1: mgmt
1 leaf leaf-r1: gpu
`, hypernodetest.Render(hns))
}
