package scheduler

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// Gangs of 8, 32 and 128 one-GPU pods on a 3-tier tree of 4 racks × 4 nodes × 8 GPUs land entirely
// in the lowest tier whose single HyperNode holds them: a rack (32 slots) for 8 and 32, the top
// (128 slots) for 128. Rack selectors cover labelMatch, regexMatch and exactMatch.
func TestGangLandsInLowestFeasibleHyperNode(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "lowest"
	ns := namespace(t, "t-lowest")
	tr := buildTree(t, test, 4, 4)

	// 8 pods: one rack (best fit among equals: the first by name).
	podGroup(t, ns, "g8", 8, hardTier(3))
	createPods(t, gangPods(test, ns, "g8", 8)...)
	got := waitBound(t, ns, "g8", 8, 60*time.Second)
	if r := tr.racksOf(got); len(r) != 1 {
		t.Fatalf("gang of 8 spans racks %v, want one rack: %v", r, got)
	}
	waitEvent(t, ns, "g8", "GangScheduled", "8 of minMember 8 pods placed in HyperNode lowest-rack-", "(tier 1)")

	// 32 pods: a whole rack; best fit skips the rack the first gang uses (it has only 24 slots left).
	podGroup(t, ns, "g32", 32, hardTier(3))
	createPods(t, gangPods(test, ns, "g32", 32)...)
	got32 := waitBound(t, ns, "g32", 32, 60*time.Second)
	r32 := tr.racksOf(got32)
	if len(r32) != 1 {
		t.Fatalf("gang of 32 spans racks %v, want one rack", r32)
	}
	for r := range tr.racksOf(got) {
		if r32[r] {
			t.Fatalf("gang of 32 shares rack %d with the gang of 8", r)
		}
	}

	// 128 pods need every GPU of the top HyperNode: free the cluster first.
	deletePods(t, ns, "g8")
	deletePods(t, ns, "g32")
	podGroup(t, ns, "g128", 128, hardTier(3))
	createPods(t, gangPods(test, ns, "g128", 128)...)
	got128 := waitBound(t, ns, "g128", 128, 120*time.Second)
	perNode := map[string]int{}
	for _, n := range got128 {
		perNode[n]++
	}
	if len(perNode) != 16 {
		t.Fatalf("gang of 128 uses %d nodes, want all 16", len(perNode))
	}
	waitEvent(t, ns, "g128", "GangScheduled", "HyperNode lowest-top (tier 3)")
}

// A gang too big for any rack lands in one spine when hard mode allows tier 2, and waits (nothing
// bound, an Event and the pods' condition say why) when hard mode stops at tier 1. Soft mode with a
// tier-1 limit still falls back upward.
func TestGangTooBigForTier1(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "toobig"
	ns := namespace(t, "t-toobig")
	tr := buildTree(t, test, 4, 2) // racks of 2 nodes = 16 one-GPU pods; spines 32

	podGroup(t, ns, "tier2", 24, hardTier(2))
	createPods(t, gangPods(test, ns, "tier2", 24)...)
	got := waitBound(t, ns, "tier2", 24, 60*time.Second)
	racks := tr.racksOf(got)
	if len(racks) != 2 {
		t.Fatalf("gang of 24 uses racks %v, want the two racks of one spine", racks)
	}
	spine := -1
	for r := range racks {
		if spine >= 0 && r/2 != spine {
			t.Fatalf("gang of 24 crosses spines: racks %v", racks)
		}
		spine = r / 2
	}
	waitEvent(t, ns, "tier2", "GangScheduled", fmt.Sprintf("HyperNode %s (tier 2)", tr.spine(spine)))

	podGroup(t, ns, "tier1", 24, hardTier(1))
	createPods(t, gangPods(test, ns, "tier1", 24)...)
	waitPodMessage(t, ns, "tier1", "no tier-1 HyperNode has room", "tier 2 and above not allowed (highestTierAllowed=1)")
	waitEvent(t, ns, "tier1", "GangWaiting", "24 more pods needing", "24 nvidia.com/gpu", "no tier-1 HyperNode has room for 24 pods (the best: ", "tier 2 and above not allowed (highestTierAllowed=1)")
	stayUnbound(t, ns, "tier1", 3*time.Second)

	// Soft mode, same size and limit: the other spine.
	podGroup(t, ns, "soft", 24, &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.SoftNetworkTopologyMode, HighestTierAllowed: intPtr(1)})
	createPods(t, gangPods(test, ns, "soft", 24)...)
	soft := waitBound(t, ns, "soft", 24, 60*time.Second)
	for r := range tr.racksOf(soft) {
		if r/2 == spine {
			t.Fatalf("soft gang uses rack %d of the occupied spine", r)
		}
	}
	stayUnbound(t, ns, "tier1", time.Second)
}

func intPtr(v int) *int { return &v }

// Two gangs that each need most of one rack are created with interleaved pods: one gets the whole
// rack, the other gets nothing (no partial binding) and completes once the first is gone (no
// deadlock).
func TestCompetingGangs(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "compete"
	ns := namespace(t, "t-compete")
	buildTree(t, test, 1, 2) // one rack: 16 one-GPU slots

	podGroup(t, ns, "a", 12, hardTier(1))
	podGroup(t, ns, "b", 12, hardTier(1))
	pa, pb := gangPods(test, ns, "a", 12), gangPods(test, ns, "b", 12)
	var all []*corev1.Pod
	for i := range pa {
		all = append(all, pa[i], pb[i])
	}
	createPods(t, all...)

	var winner, loser string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && winner == "" {
		ba, bb := bound(placements(t, ns, "a")), bound(placements(t, ns, "b"))
		switch {
		case ba == 12:
			winner, loser = "a", "b"
		case bb == 12:
			winner, loser = "b", "a"
		}
		time.Sleep(200 * time.Millisecond)
	}
	if winner == "" {
		t.Fatalf("no gang completed (deadlock?): a=%s b=%s", pendingReasons(t, ns, "a"), pendingReasons(t, ns, "b"))
	}
	stayUnbound(t, ns, loser, 3*time.Second)

	deletePods(t, ns, winner)
	waitBound(t, ns, loser, 12, 60*time.Second)
}

// A younger gang that holds reservations in a rack (one member can never be scheduled by this
// scheduler) must give them up when an older gang needs the rack: no deadlock between half-filled
// gangs, and the younger gang never binds partially.
func TestOlderGangReclaimsReservations(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "reclaim"
	ns := namespace(t, "t-reclaim")
	buildTree(t, test, 1, 2) // 16 slots

	podGroup(t, ns, "older", 12, hardTier(1))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has second resolution
	podGroup(t, ns, "younger", 12, hardTier(1))

	// The younger gang: 11 real pods and one placeholder another scheduler owns, so its 11 reserved
	// pods wait at Permit.
	young := gangPods(test, ns, "younger", 12)
	young[11].Spec.SchedulerName = "nobody"
	createPods(t, young...)
	waitFor(t, 30*time.Second, func() bool { return len(waitingPods(ns, "younger")) == 11 }, "11 younger pods waiting at Permit")

	createPods(t, gangPods(test, ns, "older", 12)...)
	waitBound(t, ns, "older", 12, 60*time.Second)
	waitEvent(t, ns, "younger", "GangReleased", fmt.Sprintf("released its reservations for older gang %s/older", ns))
	if b := bound(placements(t, ns, "younger")); b != 0 {
		t.Fatalf("younger gang has %d bound pods", b)
	}

	// The older gang leaves; the younger completes once its placeholder is replaced by a real pod.
	deletePods(t, ns, "older")
	deletePod(t, ns, young[11].Name)
	createPods(t, gangPod(test, ns, "younger", "younger-real"))
	waitBound(t, ns, "younger", 12, 60*time.Second)
}

// Deleting the HyperNode a waiting gang was placed in re-plans the gang into another HyperNode
// before its Permit timeout.
func TestHyperNodeDeleteReplansWaitingGang(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "replan"
	ns := namespace(t, "t-replan")
	tr := buildTree(t, test, 2, 1) // rack-0: 1 node, rack-1: 1 node

	podGroup(t, ns, "g", 4, hardTier(1))
	pods := gangPods(test, ns, "g", 4)
	pods[3].Spec.SchedulerName = "nobody"
	createPods(t, pods...)
	waitFor(t, 30*time.Second, func() bool { return len(waitingPods(ns, "g")) == 3 }, "3 pods waiting at Permit")
	first := waitingPods(ns, "g")
	rack := -1
	for _, n := range first {
		rack = tr.rackOf[n]
	}
	for _, n := range first {
		if tr.rackOf[n] != rack {
			t.Fatalf("waiting pods span racks: %v", first)
		}
	}

	start := time.Now()
	deleteHyperNode(t, tr.rack(rack))
	other := 1 - rack
	waitFor(t, 30*time.Second, func() bool {
		w := waitingPods(ns, "g")
		if len(w) != 3 {
			return false
		}
		for _, n := range w {
			if tr.rackOf[n] != other {
				return false
			}
		}
		return true
	}, "the waiting pods to move to the other rack")
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("re-plan took %v (Permit timeout is 60s)", d)
	}
	waitEvent(t, ns, "g", "GangReleased", fmt.Sprintf("HyperNode %s was deleted", tr.rack(rack)))

	deletePod(t, ns, pods[3].Name)
	createPods(t, gangPod(test, ns, "g", "g-real"))
	got := waitBound(t, ns, "g", 4, 60*time.Second)
	for p, n := range got {
		if tr.rackOf[n] != other {
			t.Fatalf("pod %s bound to %s outside rack %d", p, n, other)
		}
	}
}

// An invalid tree (a HyperNode with two parents) makes topology-constrained gangs wait with an
// Event naming the problem; fixing the tree lets them run. Pods without a gang are unaffected.
func TestInvalidTreeBlocksTopologyGangs(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "invalid"
	ns := namespace(t, "t-invalid")
	tr := buildTree(t, test, 2, 1)
	hyperNode(t, test+"-second-parent", 2, "spine", hyperMember(tr.rack(0)))

	podGroup(t, ns, "g", 2, hardTier(1))
	createPods(t, gangPods(test, ns, "g", 2)...)
	waitEvent(t, ns, "g", "GangWaiting", "HyperNode tree is not usable", "has two parents")
	stayUnbound(t, ns, "g", 2*time.Second)

	// A plain pod in the same profile is scheduled regardless.
	plain := gangPod(test, ns, "", "plain")
	plain.Labels["group"] = "plain"
	createPods(t, plain)
	waitBound(t, ns, "plain", 1, 30*time.Second)

	deleteHyperNode(t, test+"-second-parent")
	waitBound(t, ns, "g", 2, 60*time.Second)
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, deleteNow); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}
