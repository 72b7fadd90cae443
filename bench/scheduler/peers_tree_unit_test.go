package scheduler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
	aggs := make([]peerAgg, len(peerScheds)) // one panel per row; only hyperbatch ran
	aggs[peerHB].runs = []peerRun{r}
	svg := placementSVG(tr, aggs)
	assert.True(t, strings.HasPrefix(svg, "<svg "))
	assert.Contains(t, svg, gangs[0].name+" on tp-node-00000")
	assert.Equal(t, 2, strings.Count(svg, "<title>"), "one rect per node a gang uses")
}

// Kueue's view of the same trees: a Topology level per tier (the domain tree's tier 1 is the
// hostname), each node labelled with its HyperNode of every tier, and Kueue's own webhook manifests
// turned into loopback URL configurations.
func TestKueueTopologyLevels(t *testing.T) {
	s := threeTier(1000)
	assert.Equal(t, []string{"topology.hyperbatch.dev/top", "topology.hyperbatch.dev/spine", "topology.hyperbatch.dev/leaf", "kubernetes.io/hostname"}, s.kueueLevels())
	assert.Equal(t, map[string]string{"kubernetes.io/hostname": "tp-node-00123", kueuePoolLabel: kueuePool,
		"topology.hyperbatch.dev/leaf": "tp-rack-12", "topology.hyperbatch.dev/spine": "tp-spine-1", "topology.hyperbatch.dev/top": "tp-zone-0"}, s.nodeLabels(123))

	d := domainTree()
	assert.Equal(t, []string{"topology.hyperbatch.dev/top", "topology.hyperbatch.dev/spine", "topology.hyperbatch.dev/leaf", "kubernetes.io/hostname"}, d.kueueLevels())
	assert.Equal(t, "kubernetes.io/hostname", d.levelLabel(1), "the domain tree's tier 1 is one node")
	assert.Equal(t, d.hyperName(4, 2), d.nodeLabels(120)["topology.hyperbatch.dev/top"])
	assert.Equal(t, d.hyperName(3, 10), d.nodeLabels(120)["topology.hyperbatch.dev/spine"])
	assert.Equal(t, d.hyperName(2, 60), d.nodeLabels(120)["topology.hyperbatch.dev/leaf"])
}

// Kueue's webhook manifests (gathered by make bench-tools) become two loopback URL configurations.
func TestKueueWebhookConfigs(t *testing.T) {
	objs, err := kueueWebhookConfigs("127.0.0.1:9443", []byte("ca"))
	require.NoError(t, err, "run 'make bench-tools' first")
	require.Len(t, objs, 2)
	m, ok := objs[0].(*admissionregistrationv1.MutatingWebhookConfiguration)
	require.True(t, ok)
	assert.Equal(t, "kueue-mutating-webhook-configuration", m.Name)
	seen := map[string]bool{}
	for _, h := range m.Webhooks {
		seen[h.Name] = true
		require.NotNil(t, h.ClientConfig.URL)
		assert.True(t, strings.HasPrefix(*h.ClientConfig.URL, "https://127.0.0.1:9443/"), *h.ClientConfig.URL)
		assert.Nil(t, h.ClientConfig.Service)
		if h.Name == "mjob.kb.io" {
			assert.Equal(t, "https://127.0.0.1:9443/mutate-batch-v1-job", *h.ClientConfig.URL)
			require.NotNil(t, h.NamespaceSelector, "job-framework webhooks leave kube-system and kueue-system out")
		}
		if h.Name == "mworkload.kb.io" {
			assert.Nil(t, h.NamespaceSelector, "Kueue's own kinds are not limited by namespace")
		}
	}
	assert.True(t, seen["mjob.kb.io"] && seen["mpod.kb.io"] && seen["mworkload.kb.io"], "%v", seen)
}
