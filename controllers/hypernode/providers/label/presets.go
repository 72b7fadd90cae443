package label

import corev1 "k8s.io/api/core/v1"

// Label keys of the conventions the presets read. Each is documented by its owner; docs/discovery.md
// (Presets) links the source of each.
const (
	// NVIDIA Topograph 1.0 (docs/reference/node-labels.md): fabric tiers numbered from the node out
	// (tier-0 is the switch nearest the node), and a two-level accelerator (NVLink) hierarchy.
	TopographTierPrefix    = "fabric.topograph.run/tier-"
	TopographDomain        = "accelerator.topograph.run/domain"
	TopographSubDomain     = "accelerator.topograph.run/sub-domain"
	topographLegacyLeaf    = "network.topology.nvidia.com/leaf"
	topographLegacySpine   = "network.topology.nvidia.com/spine"
	topographLegacyCore    = "network.topology.nvidia.com/core"
	topographLegacyAccel   = "network.topology.nvidia.com/accelerator"
	topographLegacyBlock   = "network.topology.nvidia.com/block"
	topographLegacyDatactr = "network.topology.nvidia.com/datacenter"
	// GPU feature discovery (NVIDIA k8s-device-plugin): the NVLink clique of a node's GPUs,
	// "<cluster UUID>.<clique ID>".
	GPUClique = "nvidia.com/gpu.clique"
	// GKE (AI Hypercomputer, topology-aware scheduling): block > sub-block > host.
	GKEBlock    = "cloud.google.com/gce-topology-block"
	GKESubblock = "cloud.google.com/gce-topology-subblock"
	GKEHost     = "cloud.google.com/gce-topology-host"
	// EKS: network-node-layer-1 is the top of the hierarchy; layer-3 is the bottom on most
	// instance types, layer-4 exists on four-layer types only.
	EKSLayerPrefix = "topology.k8s.aws/network-node-layer-"
	// OKE: Local Block (first latency band) < Network Block < HPC Island.
	OCILocalBlock   = "oci.oraclecloud.com/rdma.local_block_id"
	OCINetworkBlock = "oci.oraclecloud.com/rdma.network_block_id"
	OCIHPCIsland    = "oci.oraclecloud.com/rdma.hpc_island_id"
	// Nebius: tier-0 is the accelerator interconnect (multi-node NVLink, set only where present),
	// tier-1 rack-level switches, tier-2 spine-level switches, gpu-cluster-id the whole fabric.
	NebiusTierPrefix = "topology.nebius.com/tier-"
	NebiusCluster    = "topology.nebius.com/gpu-cluster-id"
	// CoreWeave: backend fabric > leafgroup, and the NVLink domain of GB200 NVL72 nodes.
	CoreWeaveFabric       = "backend.coreweave.cloud/fabric"
	CoreWeaveLeafgroup    = "backend.coreweave.cloud/leafgroup"
	coreWeaveIBFabric     = "ib.coreweave.cloud/fabric"
	coreWeaveIBLeafgroup  = "ib.coreweave.cloud/leafgroup"
	CoreWeaveNVLinkDomain = "ds.coreweave.com/nvlink.domain"
)

// Tier names of the presets. Where the provider names its tiers (GKE, OCI, CoreWeave) the preset uses
// its names; where it only numbers them (Topograph, EKS, Nebius) tiers are leaf, spine and core from
// the node out. Accelerator (NVLink) tiers are nvlink, under every network tier.
const (
	TierNVLink          = "nvlink"
	TierNVLinkPartition = "nvlink-partition"
	TierLeaf            = "leaf"
	TierSpine           = "spine"
	TierCore            = "core"
)

// Presets are built-in topology types, named in config.presets; tiers nearest the node first.
var Presets = map[string][]Tier{
	// Topograph 1.0's keys; each tier still reads the pre-1.0 key (network.topology.nvidia.com/*)
	// with a warning, and the NVLink domain reads nvidia.com/gpu.clique as Topograph does when it
	// leaves its own accelerator label unset.
	"nvidia-topograph": {
		{Keys: []string{TopographSubDomain}, Name: TierNVLinkPartition, Optional: true},
		{Keys: []string{TopographDomain, GPUClique}, Deprecated: []string{topographLegacyAccel}, Name: TierNVLink, Optional: true},
		{Keys: []string{TopographTierPrefix + "0"}, Deprecated: []string{topographLegacyLeaf, topographLegacyBlock}, Name: TierLeaf},
		{Keys: []string{TopographTierPrefix + "1"}, Deprecated: []string{topographLegacySpine}, Name: TierSpine},
		{Keys: []string{TopographTierPrefix + "2"}, Deprecated: []string{topographLegacyCore, topographLegacyDatactr}, Name: TierCore},
	},
	"nvidia-gpu-clique": {
		{Keys: []string{GPUClique}, Name: TierNVLink},
	},
	"gke": {
		{Keys: []string{GKEHost}, Name: "host", Optional: true},
		{Keys: []string{GKESubblock}, Name: "subblock"},
		{Keys: []string{GKEBlock}, Name: "block"},
	},
	"eks": {
		{Keys: []string{EKSLayerPrefix + "4"}, Name: "layer4", Optional: true},
		{Keys: []string{EKSLayerPrefix + "3"}, Name: TierLeaf},
		{Keys: []string{EKSLayerPrefix + "2"}, Name: TierSpine},
		{Keys: []string{EKSLayerPrefix + "1"}, Name: TierCore},
	},
	"oci": {
		{Keys: []string{OCILocalBlock}, Name: "local-block"},
		{Keys: []string{OCINetworkBlock}, Name: "network-block"},
		{Keys: []string{OCIHPCIsland}, Name: "hpc-island"},
	},
	"nebius": {
		{Keys: []string{NebiusTierPrefix + "0"}, Name: TierNVLink, Optional: true},
		{Keys: []string{NebiusTierPrefix + "1"}, Name: TierLeaf},
		{Keys: []string{NebiusTierPrefix + "2"}, Name: TierSpine},
		{Keys: []string{NebiusCluster}, Name: "gpu-cluster"},
	},
	"coreweave": {
		{Keys: []string{CoreWeaveNVLinkDomain}, Name: TierNVLink, Optional: true},
		{Keys: []string{CoreWeaveLeafgroup, coreWeaveIBLeafgroup}, Name: "leafgroup"},
		{Keys: []string{CoreWeaveFabric, coreWeaveIBFabric}, Name: "fabric"},
	},
	// The well-known cloud labels: region above zone.
	"kubernetes-zones": {
		{Keys: []string{corev1.LabelTopologyZone}, Name: "zone"},
		{Keys: []string{corev1.LabelTopologyRegion}, Name: "region"},
	},
}
