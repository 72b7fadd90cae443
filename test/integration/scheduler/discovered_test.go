package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
)

// A tree discovered from Topograph 1.0's node labels on a mixed cluster: two GB200 NVL72 racks
// (accelerator domains, 2 nodes of 8 GPUs each here) on one leaf, and H100 nodes on two other
// leaves, all under one spine. Discovery (the label source's nvidia-topograph preset, run as the
// manager runs it) builds nvlink HyperNodes under the leaves; then the scheduler places a hard gang
// whose highestTierName is nvlink inside one NVLink domain, and a soft gang too large for any
// NVLink domain in the leaf above (both racks), never on the H100 nodes.
func TestDiscoveredNVLinkTier(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "nvl"
	ns := namespace(t, "t-nvl")
	t0, t1 := label.TopographTierPrefix+"0", label.TopographTierPrefix+"1"
	rackOf := map[string]string{}
	for r := 0; r < 2; r++ {
		for i := 0; i < 2; i++ {
			n := fmt.Sprintf("%s-gb%d-%d", test, r, i)
			rack := fmt.Sprintf("%s-nvl72-r%d", test, r)
			fakeNode(t, test, n, map[string]string{label.TopographDomain: rack, t0: test + "-leaf-gb", t1: test + "-spine"})
			rackOf[n] = rack
		}
	}
	for l := 0; l < 2; l++ {
		for i := 0; i < 2; i++ {
			fakeNode(t, test, fmt.Sprintf("%s-h%d-%d", test, l, i), map[string]string{t0: fmt.Sprintf("%s-leaf-h%d", test, l), t1: test + "-spine"})
		}
	}

	file, err := config.Parse([]byte("networkTopologyDiscovery:\n- source: label\n  enabled: true\n  interval: 1h\n  config:\n    presets: [nvidia-topograph]\n"))
	require.NoError(t, err)
	c, err := hypernode.New(env.Config, hypernode.Options{Config: file, Registry: providers.Builtin(), Log: logr.Discard()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		cctx := ctxFor(t, 30*time.Second)
		require.NoError(t, env.Client.DeleteAllOf(cctx, &topologyv1alpha1.HyperNode{}, client.MatchingLabels{hypernode.SourceLabel: label.Source}))
	})

	want := strings.Join([]string{
		"nvl-leaf-gb(2/leaf): nvl-nvl72-r0 nvl-nvl72-r1",
		"nvl-leaf-h0(2/leaf): nvl-h0-0 nvl-h0-1",
		"nvl-leaf-h1(2/leaf): nvl-h1-0 nvl-h1-1",
		"nvl-nvl72-r0(1/nvlink): nvl-gb0-0 nvl-gb0-1",
		"nvl-nvl72-r1(1/nvlink): nvl-gb1-0 nvl-gb1-1",
		"nvl-spine(3/spine): nvl-leaf-gb nvl-leaf-h0 nvl-leaf-h1",
	}, "\n")
	var got string
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var l topologyv1alpha1.HyperNodeList
		if err := env.Client.List(ctx, &l, client.MatchingLabels{hypernode.SourceLabel: label.Source}); err != nil {
			t.Logf("listing HyperNodes (will retry): %v", err)
			return false, nil
		}
		var lines []string
		for _, hn := range l.Items {
			var ms []string
			for _, m := range hn.Spec.Members {
				ms = append(ms, m.Selector.ExactMatch.Name)
			}
			sort.Strings(ms)
			lines = append(lines, fmt.Sprintf("%s(%d/%s): %s", hn.Name, hn.Spec.Tier, hn.Spec.TierName, strings.Join(ms, " ")))
		}
		sort.Strings(lines)
		got = strings.Join(lines, "\n")
		return got == want, nil
	}); err != nil {
		t.Fatalf("discovered tree:\n%s\nwant:\n%s", got, want)
	}

	// Hard, highestTierName nvlink, one rack's worth (16 GPUs): one NVLink domain.
	podGroup(t, ns, "hard", 16, &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierName: label.TierNVLink})
	createPods(t, gangPods(test, ns, "hard", 16)...)
	racks := map[string]bool{}
	for p, n := range waitBound(t, ns, "hard", 16, 90*time.Second) {
		require.Contains(t, rackOf, n, "pod %s on %s, not a GB200 node", p, n)
		racks[rackOf[n]] = true
	}
	require.Len(t, racks, 1, "the hard gang spans NVLink domains %v", racks)
	waitEvent(t, ns, "hard", "GangScheduled", "(tier 1)")
	deletePods(t, ns, "hard")

	// Soft, highestTierName nvlink, 24 GPUs: no NVLink domain holds it; it falls back to the leaf
	// above (both racks), not to the H100 leaves or the spine.
	podGroup(t, ns, "soft", 24, &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.SoftNetworkTopologyMode, HighestTierName: label.TierNVLink})
	createPods(t, gangPods(test, ns, "soft", 24)...)
	racks = map[string]bool{}
	for p, n := range waitBound(t, ns, "soft", 24, 90*time.Second) {
		require.Contains(t, rackOf, n, "pod %s on %s, outside leaf %s-leaf-gb", p, n, test)
		racks[rackOf[n]] = true
	}
	require.Len(t, racks, 2)
	waitEvent(t, ns, "soft", "GangScheduled", "HyperNode "+test+"-leaf-gb (tier 2)")
}
