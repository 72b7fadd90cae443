package label_test

import (
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
)

func preset(name string) map[string]any { return map[string]any{"presets": []any{name}} }

// Topograph 1.0 on a mixed cluster: two GB200 NVL72 racks (accelerator domains, one with two
// sub-domains) on leaf sw-a, and H100 nodes without an accelerator label on leaf sw-b, both under
// spine sp-1. The NVLink tiers sit under the leaves; the H100 nodes are members of their leaf.
func TestPresetTopograph(t *testing.T) {
	const (
		t0, t1  = label.TopographTierPrefix + "0", label.TopographTierPrefix + "1"
		dom, sd = label.TopographDomain, label.TopographSubDomain
	)
	got := tree(t, preset("nvidia-topograph"),
		labelled("gb-1", dom, "nvl72-r1", sd, "r1-p0", t0, "sw-a", t1, "sp-1"),
		labelled("gb-2", dom, "nvl72-r1", sd, "r1-p1", t0, "sw-a", t1, "sp-1"),
		labelled("gb-3", dom, "nvl72-r2", t0, "sw-a", t1, "sp-1"),
		labelled("h100-1", t0, "sw-b", t1, "sp-1"),
		labelled("h100-2", t0, "sw-b", t1, "sp-1"),
	)
	assert.Equal(t, `4 spine sp-1: sw-a sw-b
3 leaf sw-a: nvl72-r1 nvl72-r2
3 leaf sw-b: h100-1 h100-2
2 nvlink nvl72-r1: r1-p0 r1-p1
2 nvlink nvl72-r2: gb-3
1 nvlink-partition r1-p0: gb-1
1 nvlink-partition r1-p1: gb-2
`, got)

	// Without accelerator labels anywhere, the leaves are tier 1.
	got = tree(t, preset("nvidia-topograph"), labelled("h100-1", t0, "sw-b", t1, "sp-1"))
	assert.Equal(t, "2 spine sp-1: sw-b\n1 leaf sw-b: h100-1\n", got)
}

// Nodes labelled by Topograph before 1.0 (network.topology.nvidia.com/{leaf,spine,core,accelerator})
// give the same tree, and the provider warns once that they use the old keys; a GPU feature
// discovery clique stands for the accelerator domain, as in Topograph.
func TestPresetTopographOldKeys(t *testing.T) {
	var warnings []string
	log := funcr.New(func(prefix, args string) { warnings = append(warnings, args) }, funcr.Options{})
	nodes := []*corev1.Node{
		labelled("a", "network.topology.nvidia.com/leaf", "sw1", "network.topology.nvidia.com/spine", "sp1", "network.topology.nvidia.com/core", "c1"),
		labelled("b", "network.topology.nvidia.com/accelerator", "nvl1", "network.topology.nvidia.com/leaf", "sw2", "network.topology.nvidia.com/spine", "sp1", "network.topology.nvidia.com/core", "c1"),
		labelled("c", label.GPUClique, "0f6d-uuid.1", label.TopographTierPrefix+"0", "sw2", label.TopographTierPrefix+"1", "sp1", label.TopographTierPrefix+"2", "c1"),
	}
	p, err := label.NewProvider(config.Source{Source: label.Source, Config: preset("nvidia-topograph")},
		hypernode.Deps{Nodes: listerFunc(func() []*corev1.Node { return nodes }), Log: log})
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		groups, err := p.Discover()
		require.NoError(t, err)
		hns, err := hypernode.Build(label.Source, groups, nil)
		require.NoError(t, err)
		assert.Equal(t, "4 core c1: sp1\n3 spine sp1: sw1 sw2\n2 leaf sw1: a\n2 leaf sw2: 0f6d-uuid-1 nvl1\n1 nvlink 0f6d-uuid-1: c\n1 nvlink nvl1: b\n", hypernodetest.Render(hns))
	}
	require.Len(t, warnings, 1, "one warning while the count stays the same")
	assert.Contains(t, warnings[0], `"nodes"=2`)
}

// GPU feature discovery's clique label alone: one nvlink HyperNode per clique.
func TestPresetGPUClique(t *testing.T) {
	got := tree(t, preset("nvidia-gpu-clique"),
		labelled("a", label.GPUClique, "2b1c7e8a-5c2f-4d7b-9a55-0f1c2d3e4f50.32766"),
		labelled("b", label.GPUClique, "2b1c7e8a-5c2f-4d7b-9a55-0f1c2d3e4f50.32766"),
		labelled("c", label.GPUClique, "2b1c7e8a-5c2f-4d7b-9a55-0f1c2d3e4f50.1"),
		labelled("h100"))
	assert.Equal(t, "1 nvlink 2b1c7e8a-5c2f-4d7b-9a55-0f1c2d3e4f50-1: c\n1 nvlink 2b1c7e8a-5c2f-4d7b-9a55-0f1c2d3e4f50-32766: a b\n", got)
}

// GKE's documented labels: block > sub-block > host.
func TestPresetGKE(t *testing.T) {
	got := tree(t, preset("gke"),
		labelled("gke-a3u-1", label.GKEBlock, "b8d3c4e3b5a1", label.GKESubblock, "0a1b2c3d", label.GKEHost, "5e6f7a8b"),
		labelled("gke-a3u-2", label.GKEBlock, "b8d3c4e3b5a1", label.GKESubblock, "0a1b2c3d", label.GKEHost, "9c0d1e2f"),
		labelled("gke-a3u-3", label.GKEBlock, "b8d3c4e3b5a1", label.GKESubblock, "4e5f6a7b", label.GKEHost, "3a4b5c6d"))
	assert.Equal(t, `3 block b8d3c4e3b5a1: 0a1b2c3d 4e5f6a7b
2 subblock 0a1b2c3d: 5e6f7a8b 9c0d1e2f
2 subblock 4e5f6a7b: 3a4b5c6d
1 host 3a4b5c6d: gke-a3u-3
1 host 5e6f7a8b: gke-a3u-1
1 host 9c0d1e2f: gke-a3u-2
`, got)
}

// EKS: layer 1 is the top, layer 3 the bottom (nn-… values as AWS shows them); layer 4 only on
// four-layer instance types.
func TestPresetEKS(t *testing.T) {
	l := func(n string) string { return label.EKSLayerPrefix + n }
	got := tree(t, preset("eks"),
		labelled("ip-10-0-1-1", l("1"), "nn-e50490a237cb0f01a", l("2"), "nn-3c9f2b9a1d4e5f6a7", l("3"), "nn-1a2b3c4d5e6f7a8b9"),
		labelled("ip-10-0-1-2", l("1"), "nn-e50490a237cb0f01a", l("2"), "nn-3c9f2b9a1d4e5f6a7", l("3"), "nn-9b8a7f6e5d4c3b2a1"))
	assert.Equal(t, `3 core nn-e50490a237cb0f01a: nn-3c9f2b9a1d4e5f6a7
2 spine nn-3c9f2b9a1d4e5f6a7: nn-1a2b3c4d5e6f7a8b9 nn-9b8a7f6e5d4c3b2a1
1 leaf nn-1a2b3c4d5e6f7a8b9: ip-10-0-1-1
1 leaf nn-9b8a7f6e5d4c3b2a1: ip-10-0-1-2
`, got)
}

// OKE: Local Block < Network Block < HPC Island.
func TestPresetOCI(t *testing.T) {
	got := tree(t, preset("oci"),
		labelled("10.0.10.5", label.OCILocalBlock, "lb-1", label.OCINetworkBlock, "nb-1", label.OCIHPCIsland, "island-1"),
		labelled("10.0.10.6", label.OCILocalBlock, "lb-2", label.OCINetworkBlock, "nb-1", label.OCIHPCIsland, "island-1"))
	assert.Equal(t, "3 hpc-island island-1: nb-1\n2 network-block nb-1: lb-1 lb-2\n1 local-block lb-1: 10.0.10.5\n1 local-block lb-2: 10.0.10.6\n", got)
}

// Nebius: tier-0 (multi-node NVLink, only where present) < tier-1 < tier-2 < gpu-cluster-id.
func TestPresetNebius(t *testing.T) {
	n := func(i string) string { return label.NebiusTierPrefix + i }
	got := tree(t, preset("nebius"),
		labelled("gb-1", label.NebiusCluster, "computegpucluster-e00a", n("2"), "s1", n("1"), "r1", n("0"), "nvl-1"),
		labelled("h200-1", label.NebiusCluster, "computegpucluster-e00a", n("2"), "s1", n("1"), "r2"))
	assert.Equal(t, `4 gpu-cluster computegpucluster-e00a: s1
3 spine s1: r1 r2
2 leaf r1: nvl-1
2 leaf r2: h200-1
1 nvlink nvl-1: gb-1
`, got)
}

// CoreWeave: fabric > leafgroup (the current backend.coreweave.cloud keys or the older
// ib.coreweave.cloud ones) > NVLink domain of GB200 NVL72 nodes. Leafgroup numbers repeat across
// fabrics; path identity keeps them apart.
func TestPresetCoreWeave(t *testing.T) {
	got := tree(t, preset("coreweave"),
		labelled("g1", label.CoreWeaveFabric, "us-east-04a", label.CoreWeaveLeafgroup, "3", label.CoreWeaveNVLinkDomain, "nvl72-0012"),
		labelled("g2", "ib.coreweave.cloud/fabric", "us-east-04b", "ib.coreweave.cloud/leafgroup", "3"))
	lg1, lg2 := hypernode.WithHash("3", "coreweave|"+label.CoreWeaveFabric+"=us-east-04a|"+label.CoreWeaveLeafgroup+"=3"),
		hypernode.WithHash("3", "coreweave|"+label.CoreWeaveFabric+"=us-east-04b|"+label.CoreWeaveLeafgroup+"=3")
	assert.Equal(t, sortLines("3 fabric us-east-04a: "+lg1+"\n3 fabric us-east-04b: "+lg2+"\n2 leafgroup "+lg1+": nvl72-0012\n2 leafgroup "+lg2+": g2\n1 nvlink nvl72-0012: g1\n"), sortLines(got))
}

// The well-known region and zone labels.
func TestPresetKubernetesZones(t *testing.T) {
	got := tree(t, preset("kubernetes-zones"),
		labelled("a", corev1.LabelTopologyZone, "eu-1a", corev1.LabelTopologyRegion, "eu-1"),
		labelled("b", corev1.LabelTopologyZone, "eu-1b", corev1.LabelTopologyRegion, "eu-1"))
	assert.Equal(t, "2 region eu-1: eu-1a eu-1b\n1 zone eu-1a: a\n1 zone eu-1b: b\n", got)
}
