package hypernode

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
)

// Every preset at once, on Nodes labelled as each provider documents: the manager's label source
// writes each provider's tree through the real API server with the preset's tier names, one write
// per HyperNode, and a round after that writes nothing.
func TestPresetTrees(t *testing.T) {
	tg := func(i string) string { return label.TopographTierPrefix + i }
	eks := func(i string) string { return label.EKSLayerPrefix + i }
	neb := func(i string) string { return label.NebiusTierPrefix + i }
	for name, labels := range map[string]map[string]string{
		// NVIDIA Topograph 1.0: an NVL72 node and an H100 node on one spine.
		"tg-gb": {label.TopographDomain: "tg-nvl-0", tg("0"): "tg-leaf-a", tg("1"): "tg-spine"},
		"tg-h":  {tg("0"): "tg-leaf-b", tg("1"): "tg-spine"},
		// GPU feature discovery's clique, read by the nvidia-topograph preset when a node has no
		// Topograph accelerator label (nvidia-gpu-clique alone reads the same key; the two together
		// are refused).
		"gfd-0": {label.GPUClique: "0b6e1f2a-7c3d-4e5f-8a9b-0c1d2e3f4a5b.7"},
		// GKE.
		"gke-0": {label.GKEBlock: "gke-b1", label.GKESubblock: "gke-sb1", label.GKEHost: "gke-h1"},
		// EKS (layer 1 is the top).
		"eks-0": {eks("1"): "nn-top0000000000001", eks("2"): "nn-mid0000000000001", eks("3"): "nn-bot0000000000001"},
		// OKE.
		"oci-0": {label.OCIHPCIsland: "oci-island", label.OCINetworkBlock: "oci-nb", label.OCILocalBlock: "oci-lb"},
		// Nebius, with a multi-node NVLink tier-0.
		"neb-0": {label.NebiusCluster: "neb-cluster", neb("2"): "neb-t2", neb("1"): "neb-t1", neb("0"): "neb-t0"},
		// CoreWeave, the backend.coreweave.cloud keys.
		"cw-0": {label.CoreWeaveFabric: "cw-fabric", label.CoreWeaveLeafgroup: "cw-lg7", label.CoreWeaveNVLinkDomain: "cw-nvl"},
	} {
		node(t, name, labels)
	}
	d := startDiscovery(t, `
networkTopologyDiscovery:
  - source: label
    enabled: true
    interval: 1h
    config:
      presets: [nvidia-topograph, gke, eks, oci, nebius, coreweave]
`)
	want := sortLines(strings.Join([]string{
		"tg-spine(3/spine,label): tg-leaf-a tg-leaf-b",
		"tg-leaf-a(2/leaf,label): tg-nvl-0",
		"tg-leaf-b(2/leaf,label): tg-h",
		"tg-nvl-0(1/nvlink,label): tg-gb",
		"0b6e1f2a-7c3d-4e5f-8a9b-0c1d2e3f4a5b-7(1/nvlink,label): gfd-0",
		"gke-b1(3/block,label): gke-sb1",
		"gke-sb1(2/subblock,label): gke-h1",
		"gke-h1(1/host,label): gke-0",
		"nn-top0000000000001(3/core,label): nn-mid0000000000001",
		"nn-mid0000000000001(2/spine,label): nn-bot0000000000001",
		"nn-bot0000000000001(1/leaf,label): eks-0",
		"oci-island(3/hpc-island,label): oci-nb",
		"oci-nb(2/network-block,label): oci-lb",
		"oci-lb(1/local-block,label): oci-0",
		"neb-cluster(4/gpu-cluster,label): neb-t2",
		"neb-t2(3/spine,label): neb-t1",
		"neb-t1(2/leaf,label): neb-t0",
		"neb-t0(1/nvlink,label): neb-0",
		"cw-fabric(3/fabric,label): cw-lg7",
		"cw-lg7(2/leafgroup,label): cw-nvl",
		"cw-nvl(1/nvlink,label): cw-0",
	}, "\n"))
	w := d.settle(t, 0, want)
	assert.Len(t, w, 21, "one write per HyperNode: %v", w)
}
