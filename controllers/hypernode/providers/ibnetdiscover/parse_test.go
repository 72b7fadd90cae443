package ibnetdiscover_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ibnetdiscover"
)

func parseGolden(t *testing.T, name string) *fabric.Graph {
	t.Helper()
	f, err := os.Open(filepath.Join(hypernodetest.FabricTestdata, "ibnetdiscover", name+".txt"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	g, err := ibnetdiscover.Parse(f)
	require.NoError(t, err)
	return g
}

// The golden dumps parse into the expected switches, hosts and links, and tier into the expected
// trees (which the ufm source's payloads for the same fabrics must give too).
func TestGoldenFabrics(t *testing.T) {
	stats := map[string]fabric.Stats{
		"two-tier":       {Switches: 6, Hosts: 8, Links: 16},
		"three-tier":     {Switches: 10, Hosts: 8, Links: 24},
		"rail-optimised": {Switches: 12, Hosts: 8, Links: 40},
	}
	for _, name := range hypernodetest.GoldenFabrics {
		t.Run(name, func(t *testing.T) {
			g := parseGolden(t, name)
			assert.Equal(t, stats[name], g.Stats())
			hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.GoldenNodes(), "")), nil)
			require.NoError(t, err)
			hypernodetest.CheckGolden(t, filepath.Join(hypernodetest.FabricTestdata, "expected", name+".txt"), hypernodetest.Render(hns))
		})
	}
}

// A rail-optimised host is one device with the GUIDs of all its HCAs, and a node label holding any
// of them maps the host to its Node.
func TestHostsByLabel(t *testing.T) {
	g := parseGolden(t, "rail-optimised")
	var host *fabric.Device
	for _, d := range g.Devices {
		if d.Kind == fabric.Host && d.Name == "gpu05" {
			host = d
		}
	}
	require.NotNil(t, host)
	require.Len(t, host.Aliases, 4)
	nodes := hypernodetest.Nodes(map[string]string{"example.com/hca": "0x" + strings.TrimLeft(host.Aliases[2], "0")}, "worker-7")
	match := fabric.NodeMatcher(nodes, "example.com/hca")
	n, ok := match(host)
	require.True(t, ok)
	assert.Equal(t, "worker-7", n)
}

// Renaming a switch (its node description) changes no HyperNode name: names come from GUIDs.
func TestSwitchRenameKeepsNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "ibnetdiscover", "two-tier.txt"))
	require.NoError(t, err)
	renamed := strings.ReplaceAll(string(b), "leaf-00", "rack7-leaf-a")
	require.NotEqual(t, string(b), renamed)
	g, err := ibnetdiscover.Parse(strings.NewReader(renamed))
	require.NoError(t, err)
	hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.GoldenNodes(), "")), nil)
	require.NoError(t, err)
	hypernodetest.CheckGolden(t, filepath.Join(hypernodetest.FabricTestdata, "expected", "two-tier.txt"), hypernodetest.Render(hns))
}

func TestParseErrors(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"empty":        {"", "names no switch"},
		"bad node":     {"Switch 36 S-0002\n", "line 1"},
		"orphan port":  {"[1]\t\"H-0002c903000a0b0c\"[1]\n", "port line before any Switch or Ca line"},
		"bad port":     {"Switch\t36 \"S-0002c90300a0b0c0\"\t\t# \"x\"\n[1] garbage\n", "line 2"},
		"bad guid":     {"Switch\t36 \"S-0002c90300a0b0c0ffff\"\n", "not a 64-bit hex number"},
		"hosts listed": {"Ca\t1 \"H-0002c903000a0b0c\"\t\t# \"node01\"\n", "names no switch"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ibnetdiscover.Parse(strings.NewReader(c.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// Synthetic edge cases of the host rule: a spine's SHARP aggregation node, an unconfigured HCA
// on two leaves, a CA without a description and one with a one-word description are not hosts, so
// neither the spine becomes a leaf nor the two leaves are joined.
func TestNotHosts(t *testing.T) {
	const dump = `Switch	41 "S-0000000000000a01"		# "MF0;leaf-a:MQM9700/U1" enhanced port 0 lid 1 lmc 0
[1]	"H-0000000000001001"[1](1001) 		# "node01 mlx5_0" lid 10 4xNDR
[2]	"H-0000000000002001"[1](2001) 		# "MT4129 ConnectX7   Mellanox Technologies" lid 11 4xNDR
[3]	"H-0000000000003001"[1](3001) 		# "" lid 12 4xNDR
[40]	"S-0000000000000c01"[1]		# "MF0;spine-1:MQM9700/U1" lid 3 4xNDR

Switch	41 "S-0000000000000b01"		# "MF0;leaf-b:MQM9700/U1" enhanced port 0 lid 2 lmc 0
[1]	"H-0000000000001002"[1](1002) 		# "node02 mlx5_0" lid 20 4xNDR
[2]	"H-0000000000002002"[1](2002) 		# "MT4129 ConnectX7   Mellanox Technologies" lid 21 4xNDR
[3]	"H-0000000000004001"[1](4001) 		# "lonely" lid 22 4xNDR
[40]	"S-0000000000000c01"[2]		# "MF0;spine-1:MQM9700/U1" lid 3 4xNDR

Switch	41 "S-0000000000000c01"		# "MF0;spine-1:MQM9700/U1" enhanced port 0 lid 3 lmc 0
[1]	"S-0000000000000a01"[40]		# "MF0;leaf-a:MQM9700/U1" lid 1 4xNDR
[2]	"S-0000000000000b01"[40]		# "MF0;leaf-b:MQM9700/U1" lid 2 4xNDR
[41]	"H-0000000000000c02"[1](c02) 		# "Mellanox Technologies Aggregation Node" lid 30 4xNDR
`
	g, err := ibnetdiscover.Parse(strings.NewReader(dump))
	require.NoError(t, err)
	assert.Equal(t, fabric.Stats{Switches: 3, Hosts: 2, Links: 4}, g.Stats())
	assert.Equal(t, map[string]int{ibnetdiscover.SkipAggregationNode: 1, ibnetdiscover.SkipUnconfigured: 4}, g.Skipped)
	hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.Nodes(nil, "node01", "node02"), "")), nil)
	require.NoError(t, err)
	assert.Equal(t, "2 spine spine-0000000000000c01: leaf-0000000000000a01 leaf-0000000000000b01\n1 leaf leaf-0000000000000a01: node01\n1 leaf leaf-0000000000000b01: node02\n", hypernodetest.Render(hns))
}
