package ibnetdiscover_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ibnetdiscover"
)

// topographCapture parses NVIDIA Topograph's ibnetdiscover capture of a DGX H100 cluster (40
// Quantum-2 switches: 31 rail leaves in 8 scalable units, 9 spines), read from the Go module cache.
func topographCapture(t *testing.T) (dir string, g *fabric.Graph, raw []byte) {
	t.Helper()
	dir = hypernodetest.ModuleDir(t, hypernodetest.Topograph)
	raw, err := os.ReadFile(filepath.Join(dir, "tests", "output", "ibnetdiscover", "example.out"))
	require.NoError(t, err)
	g, err = ibnetdiscover.Parse(strings.NewReader(string(raw)))
	require.NoError(t, err)
	return dir, g, raw
}

var dgxHost = regexp.MustCompile(`# "([a-z]\d\d-p1-dgx-(\d\d)-c\d\d) (?:HCA|mlx5_)\S*"`)

// With every DGX of the capture a Node, the tree is NVIDIA's: 8 scalable-unit leaves (each the 4
// rail leaves its DGXs are cabled to) under one spine. The capture's SHARP aggregation nodes (one per
// switch, spines included) and unconfigured HCAs ("MT4129 ConnectX7 ...") are not hosts; taken as
// hosts they joined everything into one leaf.
func TestTopographCaptureAllNodes(t *testing.T) {
	_, g, raw := topographCapture(t)
	assert.Equal(t, fabric.Stats{Switches: 40, Hosts: 122, Links: 742}, g.Stats())
	assert.Equal(t, map[string]int{ibnetdiscover.SkipAggregationNode: 40, ibnetdiscover.SkipUnconfigured: 69}, g.Skipped)

	su := map[string]string{} // node → scalable unit, from the host names (a06-p1-dgx-02-c01 is in SU 02)
	for _, m := range dgxHost.FindAllStringSubmatch(string(raw), -1) {
		su[m[1]] = m[2]
	}
	names := make([]string, 0, len(su))
	for n := range su {
		names = append(names, n)
	}
	hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.Nodes(nil, names...), "")), nil)
	require.NoError(t, err)
	hypernodetest.CheckGolden(t, filepath.Join(hypernodetest.FabricTestdata, "expected", "topograph-example.txt"), hypernodetest.Render(hns))

	var leaves, spines []*topologyv1alpha1.HyperNode
	for _, hn := range hns {
		switch hn.Spec.TierName {
		case "leaf":
			leaves = append(leaves, hn)
		case "spine":
			spines = append(spines, hn)
		default:
			t.Errorf("unexpected tier %s in %s", hn.Spec.TierName, hn.Name)
		}
	}
	require.Len(t, leaves, 8, "one leaf per scalable unit")
	require.Len(t, spines, 1)
	assert.Len(t, spines[0].Spec.Members, 8)
	seen := 0
	for _, l := range leaves {
		units := map[string]bool{}
		for _, m := range l.Spec.Members {
			units[su[m.Selector.ExactMatch.Name]] = true
			seen++
		}
		assert.Len(t, units, 1, "leaf %s mixes scalable units: %v", l.Name, units)
	}
	assert.Equal(t, len(su), seen, "every DGX is in exactly one leaf")
}

// NVIDIA's own test of the capture (pkg/ib TestGenerateTopologyConfigValid, read from the module
// cache): with its 38 instances as Nodes, each of its leaf switches' node sets is one of our leaves,
// and the leaves its spine holds are under one spine of ours. One difference, by design: NVIDIA's
// tree puts A09-P1-IBLEAF-04-04 on top, because Topograph's level-by-level walk takes a leaf whose
// hosts are not in the cluster for an upper switch; we tier by the cabling (it is a leaf, and with
// no Node under it, it is not written).
func TestTopographOwnersTree(t *testing.T) {
	dir, g, _ := topographCapture(t)
	src, err := os.ReadFile(filepath.Join(dir, "pkg", "ib", "ib_test.go"))
	require.NoError(t, err)
	body := string(src)
	start := strings.Index(body, "func TestGenerateTopologyConfigValid")
	require.GreaterOrEqual(t, start, 0, "NVIDIA's test TestGenerateTopologyConfigValid is gone; re-check the pin")
	body = body[start:]
	body = body[:strings.Index(body[1:], "\nfunc ")+1]

	var nodes []string
	for _, m := range regexp.MustCompile(`"([a-z0-9-]+)":\s*"([a-z0-9-]+)"`).FindAllStringSubmatch(body, -1) {
		if m[1] == m[2] {
			nodes = append(nodes, m[1])
		}
	}
	require.Len(t, nodes, 38)
	type vertex struct{ switches, nodes []string }
	want := map[string]vertex{}
	for _, m := range regexp.MustCompile(`SwitchName=S-([0-9a-f]+) (Switches|Nodes)=(\S+)`).FindAllStringSubmatch(body, -1) {
		guid, err := fabric.NormalizeGUID(m[1])
		require.NoError(t, err)
		v := want[guid]
		if m[2] == "Nodes" {
			v.nodes = expandHostlist(t, m[3])
		} else {
			for _, s := range strings.Split(m[3], ",") {
				sg, err := fabric.NormalizeGUID(strings.TrimPrefix(s, "S-"))
				require.NoError(t, err)
				v.switches = append(v.switches, sg)
			}
		}
		want[guid] = v
	}
	require.Len(t, want, 5, "NVIDIA's expected tree")

	hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.Nodes(nil, nodes...), "")), nil)
	require.NoError(t, err)
	leafOf := map[string]string{} // sorted node set → our leaf
	parent := map[string]string{}
	for _, hn := range hns {
		var ms []string
		for _, m := range hn.Spec.Members {
			ms = append(ms, m.Selector.ExactMatch.Name)
			parent[m.Selector.ExactMatch.Name] = hn.Name
		}
		sort.Strings(ms)
		if hn.Spec.Tier == 1 {
			leafOf[strings.Join(ms, ",")] = hn.Name
		}
	}
	ourLeaf := map[string]string{} // NVIDIA leaf switch → our leaf
	for guid, v := range want {
		if v.nodes == nil {
			continue
		}
		sort.Strings(v.nodes)
		l, ok := leafOf[strings.Join(v.nodes, ",")]
		assert.True(t, ok, "NVIDIA's leaf %s holds %v; no leaf of ours holds exactly these nodes (ours: %v)", guid, v.nodes, leafOf)
		ourLeaf[guid] = l
	}
	assert.Len(t, ourLeaf, 3)
	assert.Len(t, leafOf, 3, "our leaves are NVIDIA's, no more")
	for guid, v := range want {
		if v.nodes != nil || len(v.switches) < 2 {
			continue
		}
		// NVIDIA's spine: its leaves share one parent of ours, a spine.
		spines := map[string]bool{}
		for _, c := range v.switches {
			spines[parent[ourLeaf[c]]] = true
		}
		assert.Len(t, spines, 1, "NVIDIA's spine %s holds %v; ours put them under %v", guid, v.switches, spines)
		for s := range spines {
			assert.True(t, strings.HasPrefix(s, "spine-"), s)
			assert.Empty(t, parent[s], "our spine is the root")
		}
	}
	// NVIDIA's root holds only a spine: the switch is a leaf of the fabric (its ports reach DGXs).
	top, err := fabric.NormalizeGUID("2c5eab0300b87b40")
	require.NoError(t, err)
	require.Nil(t, want[top].nodes)
	require.Len(t, want[top].switches, 1)
	assert.True(t, g.IsLeaf(top), "A09-P1-IBLEAF-04-04 is cabled to hosts")
}

// expandHostlist expands Slurm's host list syntax: a06-p1-dgx-02-c[01-04,07] → a06-p1-dgx-02-c01 ...
func expandHostlist(t *testing.T, s string) []string {
	t.Helper()
	i := strings.IndexByte(s, '[')
	if i < 0 {
		return strings.Split(s, ",")
	}
	prefix, ranges := s[:i], strings.TrimSuffix(s[i+1:], "]")
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, _ := strings.Cut(r, "-")
		if hi == "" {
			hi = lo
		}
		a, err := strconv.Atoi(lo)
		require.NoError(t, err)
		b, err := strconv.Atoi(hi)
		require.NoError(t, err)
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%s%0*d", prefix, len(lo), n))
		}
	}
	return out
}

// Two fabrics in one capture (issue 38): Topograph's compute fabric with a management fabric
// written after it in the same format (testdata/ibnetdiscover/management-fabric.txt: two spines,
// two leaves with four management hosts and the management HCA of five DGXs, one leaf with no
// host). No cable joins the fabrics; only the DGXs' management HCAs touch both.
//   - The compute tree is exactly the one of the capture alone (the golden file): the DGXs stay in
//     their scalable units, no management switch or host joins it, and it keeps its 2 tiers.
//   - The management hosts form a tree of their own: their two leaves under one spine.
//   - The host-less management leaf becomes no HyperNode (it was a "core" over both trees' spines).
func TestTopographCaptureWithManagementFabric(t *testing.T) {
	_, _, raw := topographCapture(t)
	mgmt, err := os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "ibnetdiscover", "management-fabric.txt"))
	require.NoError(t, err)
	g, err := ibnetdiscover.Parse(strings.NewReader(string(raw) + "\n" + string(mgmt)))
	require.NoError(t, err)
	assert.Equal(t, fabric.Stats{Switches: 45, Hosts: 126, Links: 742 + 6 + 9}, g.Stats())

	var names []string
	for _, m := range dgxHost.FindAllStringSubmatch(string(raw), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	mgmtHosts := []string{"mgmt-head-01", "mgmt-head-02", "ufm-01", "slurm-ctl-01"}
	hns, err := hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.Nodes(nil, append(names, mgmtHosts...)...), "")), nil)
	require.NoError(t, err)
	mgmtTree := []string{
		"2 spine spine-b83fd2030010a100: leaf-b83fd2030010a200 leaf-b83fd2030010a240",
		"1 leaf leaf-b83fd2030010a200: mgmt-head-01 mgmt-head-02",
		"1 leaf leaf-b83fd2030010a240: slurm-ctl-01 ufm-01",
	}
	var compute, management []string
	for _, line := range strings.Split(strings.TrimSuffix(hypernodetest.Render(hns), "\n"), "\n") {
		if strings.Contains(line, "b83fd2030010a") {
			management = append(management, line)
		} else {
			compute = append(compute, line)
		}
	}
	want, err := os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "expected", "topograph-example.txt"))
	require.NoError(t, err)
	assert.Equal(t, string(want), strings.Join(compute, "\n")+"\n", "the compute tree is the capture's alone")
	assert.Equal(t, mgmtTree, management, "the management hosts form a tree of their own; the host-less leaf is none")

	// Without Nodes for the management hosts there is no management tree at all.
	hns, err = hypernode.Build(ibnetdiscover.Source, g.Groups(fabric.NodeMatcher(hypernodetest.Nodes(nil, names...), "")), nil)
	require.NoError(t, err)
	assert.Equal(t, string(want), hypernodetest.Render(hns))
}
