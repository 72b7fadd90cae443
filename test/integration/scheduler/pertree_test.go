package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// mixedFabric is a GB200-like NVL tree beside an H100 tree (fake nodes of 8 GPUs, one-GPU pods):
//
//	NVL:  <t>-nvl-rack-0/1 (tier 1, nvl-rack, 2 nodes = 16 pods) → <t>-nvl-block (tier 2, nvl-block)
//	H100: <t>-h100-leaf-0..3 (tier 1, leaf, 2 nodes) → <t>-h100-spine-0/1 (tier 2, spine)
//	      → <t>-h100-core (tier 3, core)
//
// It returns node → the HyperNodes containing it (lowest first).
func mixedFabric(t *testing.T, test string) map[string][]string {
	t.Helper()
	in := map[string][]string{}
	node := func(name string, parents ...string) topologyv1alpha1.MemberSpec {
		fakeNode(t, test, name, nil)
		in[name] = parents
		return nodeMember(name)
	}
	n := func(s string) string { return test + "-" + s }
	for r := 0; r < 2; r++ {
		rack := n(fmt.Sprintf("nvl-rack-%d", r))
		hyperNode(t, rack, 1, "nvl-rack",
			node(n(fmt.Sprintf("gb%d-0", r)), rack, n("nvl-block")), node(n(fmt.Sprintf("gb%d-1", r)), rack, n("nvl-block")))
	}
	hyperNode(t, n("nvl-block"), 2, "nvl-block", hyperMember(n("nvl-rack-0")), hyperMember(n("nvl-rack-1")))
	for l := 0; l < 4; l++ {
		leaf, spine := n(fmt.Sprintf("h100-leaf-%d", l)), n(fmt.Sprintf("h100-spine-%d", l/2))
		hyperNode(t, leaf, 1, "leaf",
			node(n(fmt.Sprintf("h%d-0", l)), leaf, spine, n("h100-core")), node(n(fmt.Sprintf("h%d-1", l)), leaf, spine, n("h100-core")))
	}
	for s := 0; s < 2; s++ {
		hyperNode(t, n(fmt.Sprintf("h100-spine-%d", s)), 2, "spine",
			hyperMember(n(fmt.Sprintf("h100-leaf-%d", 2*s))), hyperMember(n(fmt.Sprintf("h100-leaf-%d", 2*s+1))))
	}
	hyperNode(t, n("h100-core"), 3, "core", hyperMember(n("h100-spine-0")), hyperMember(n("h100-spine-1")))
	return in
}

// highestTierName resolves per tree on a mixed NVL + H100 fabric: each gang lands inside a HyperNode
// of the named tier (or below one) of the tree that has that name, never in the other tree, even
// where the other tree's HyperNode of the same tier number would be the best fit; a typo waits with
// an Event and a pod condition naming the field.
func TestHighestTierNamePerTree(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "mixed"
	ns := namespace(t, "t-mixed")
	in := mixedFabric(t, test)
	within := func(got map[string]string, hn string) {
		t.Helper()
		for p, node := range got {
			require.Contains(t, in[node], hn, "pod %s on %s, outside %s", p, node, hn)
		}
	}
	for _, tc := range []struct {
		tierName string
		pods     int
		want     string // the HyperNode holding the whole gang
		event    string
	}{
		{"nvl-rack", 16, test + "-nvl-rack-0", "HyperNode " + test + "-nvl-rack-0 (tier 1)"},
		{"nvl-block", 32, test + "-nvl-block", "HyperNode " + test + "-nvl-block (tier 2)"},
		{"leaf", 16, test + "-h100-leaf-0", "HyperNode " + test + "-h100-leaf-0 (tier 1)"},
		{"spine", 32, test + "-h100-spine-0", "HyperNode " + test + "-h100-spine-0 (tier 2)"},
		{"core", 64, test + "-h100-core", "HyperNode " + test + "-h100-core (tier 3)"},
	} {
		t.Run(tc.tierName, func(t *testing.T) {
			g := "g-" + tc.tierName
			podGroup(t, ns, g, int32(tc.pods), &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierName: tc.tierName})
			createPods(t, gangPods(test, ns, g, tc.pods)...)
			within(waitBound(t, ns, g, tc.pods, 90*time.Second), tc.want)
			waitEvent(t, ns, g, "GangScheduled", tc.event)
			deletePods(t, ns, g)
		})
	}
	t.Run("typo", func(t *testing.T) {
		podGroup(t, ns, "g-typo", 4, &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierName: "nvl-rak"})
		createPods(t, gangPods(test, ns, "g-typo", 4)...)
		waitEvent(t, ns, "g-typo", "GangWaiting", `highestTierName "nvl-rak" matches no HyperNode tierName`, "spec.networkTopology.highestTierName")
		waitPodMessage(t, ns, "g-typo", `highestTierName "nvl-rak" matches no HyperNode tierName`)
		require.Zero(t, bound(placements(t, ns, "g-typo")))
	})
}

// A gang that fits no single leaf is packed into the fewest leaves of its domain, best fit first:
// with four one-node racks (8 slots each) under one spine, rack 0 half used, a gang of 12 takes one
// free rack whole and the last 4 pods go to rack 0's 4 free slots, instead of spreading over three
// or four racks.
func TestOverflowPacksFewestLeaves(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "pack"
	ns := namespace(t, "t-pack")
	var racks []topologyv1alpha1.MemberSpec
	rackOf := map[string]int{}
	for r := 0; r < 4; r++ {
		n := fmt.Sprintf("%s-r%d-n0", test, r)
		fakeNode(t, test, n, nil)
		rackOf[n] = r
		hyperNode(t, fmt.Sprintf("%s-rack-%d", test, r), 1, "rack", nodeMember(n))
		racks = append(racks, hyperMember(fmt.Sprintf("%s-rack-%d", test, r)))
	}
	hyperNode(t, test+"-spine", 2, "spine", racks...)

	filler := gangPod(test, ns, "", "filler")
	filler.Labels["group"] = "filler"
	filler.Spec.NodeName = test + "-r0-n0"
	filler.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("4")
	filler.Spec.Containers[0].Resources.Limits[gpu] = resource.MustParse("4")
	createPods(t, filler)

	podGroup(t, ns, "g", 12, hardTier(2))
	createPods(t, gangPods(test, ns, "g", 12)...)
	got := waitBound(t, ns, "g", 12, 60*time.Second)
	perRack := map[int]int{}
	for _, n := range got {
		perRack[rackOf[n]]++
	}
	require.Equal(t, map[int]int{0: 4, 1: 8}, perRack, "the gang must fill rack 1 and rack 0's free half")
	waitEvent(t, ns, "g", "GangScheduled", "HyperNode "+test+"-spine (tier 2), packed into 2 leaves ("+test+"-rack-0, "+test+"-rack-1)")
}
