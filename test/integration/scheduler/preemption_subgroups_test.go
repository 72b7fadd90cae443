package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// boundGang creates PodGroup name and n one-GPU pods of it bound to node directly (no scheduler), of
// the priority class: a running gang at a place the test chooses.
func boundGang(t *testing.T, test, ns, name, node string, n int, class string) {
	t.Helper()
	podGroup(t, ns, name, int32(n), hardTier(1))
	pods := gangPods(test, ns, name, n)
	for _, p := range pods {
		p.Spec.NodeName = node
		p.Spec.PriorityClassName = class
	}
	createPods(t, pods...)
}

// TestGangPreemptionInSubGroupShape: a preemptor of two sub-groups of 12 pods, each hard inside one
// rack (tier 1), the gang inside one spine (tier 2), on racks of two 8-GPU nodes. In spine-0, rack 0
// has a free node and a low-priority gang of 8, rack 1 a node taken at the preemptor's priority and a
// low-priority gang of 8: evicting the two gangs gives 24 GPUs, the cheapest flat room (spine-1 would
// take three gangs), but 16 + 8, so the second sub-group fits no rack there whatever is evicted. In
// spine-1 every node runs one low-priority gang of 8: it takes all four to free 12 GPUs in each rack.
// The preemptor clears spine-1 (its own shape), not spine-0 (the flat cheapest), binds with each
// sub-group inside one rack, and the victims are exactly the four gangs, each evicted whole.
func TestGangPreemptionInSubGroupShape(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "psub"
	ns := namespace(t, "t-psub")
	tr := buildTree(t, test, 4, 2) // racks of 16 GPUs; spine-0 = racks 0,1; spine-1 = racks 2,3
	// Pods of the preemptor's priority: never victims.
	keep := func(name, node string, gpus int64) {
		p := builders.MakeGangPod(ns, name, "", schedulerName).Label("group", "keep").PriorityClass(highPriority).GPUs(gpus).Obj()
		p.Spec.NodeName = node
		createPods(t, p)
	}
	keep("keep-000", tr.racks[1][0], 8)
	victims := map[string]string{ // gang → node
		"a": tr.racks[0][1], "b": tr.racks[1][1],
		"c": tr.racks[2][0], "d": tr.racks[2][1], "e": tr.racks[3][0], "f": tr.racks[3][1],
	}
	gangs := map[string]map[string]string{}
	for g, node := range victims {
		boundGang(t, test, ns, g, node, 8, lowPriority)
	}
	for g := range victims {
		gangs[g] = waitBound(t, ns, g, 8, 30*time.Second)
	}

	del := watchDeletions(t, ns)
	leaf := &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	pg := builders.MakePodGroup(ns, "urgent").MinMember(24).NetworkTopology(hardTier(2)).Obj()
	pg.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "tp", SubGroupSize: ptr.To(int32(12)),
		MinSubGroups: ptr.To(int32(2)), MatchLabelKeys: []string{"part"}, NetworkTopology: leaf}}
	if err := env.Client.Create(ctxFor(t, 30*time.Second), pg); err != nil {
		t.Fatalf("create PodGroup urgent: %v", err)
	}
	var pods []*corev1.Pod
	for p := 0; p < 2; p++ {
		for i := 0; i < 12; i++ {
			pod := gangPod(test, ns, "urgent", fmt.Sprintf("urgent-p%d-%02d", p, i))
			pod.Labels["part"] = fmt.Sprint(p)
			pod.Spec.PriorityClassName = highPriority
			pods = append(pods, pod)
		}
	}
	createPods(t, pods...)

	got := waitBound(t, ns, "urgent", 24, 120*time.Second)
	parts := partRacks(tr, got)
	if len(parts) != 2 {
		t.Fatalf("urgent sub-groups %v, want 2", parts)
	}
	for part, racks := range parts {
		if len(racks) != 1 {
			t.Fatalf("sub-group %s spans racks %v, want one", part, racks)
		}
		for r := range racks {
			if r/2 != 1 {
				t.Fatalf("sub-group %s in rack %d, outside spine-1 (spine-0 cannot hold a second sub-group of 12)", part, r)
			}
		}
	}
	waitEvent(t, ns, "urgent", "GangPreempting", "to clear HyperNode psub-spine-1 (tier 2)")

	// The victims are exactly c, d, e and f, each gone whole; a, b and the keep pods still run.
	deleted := del.settled(t, ns)
	lost := map[string]int{}
	for name := range deleted {
		lost[gangOfPod(name)]++
	}
	var names []string
	for g, n := range lost {
		names = append(names, g)
		if n != len(gangs[g]) {
			t.Errorf("gang %s lost %d of its %d pods: partly evicted", g, n, len(gangs[g]))
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "c,d,e,f" {
		t.Fatalf("victims %v, want exactly c, d, e and f (spine-1's gangs)", names)
	}
	for _, g := range []string{"a", "b"} {
		if b := bound(placements(t, ns, g)); b != 8 {
			t.Errorf("gang %s was not a victim yet has %d of 8 pods bound", g, b)
		}
	}
	if b := bound(placements(t, ns, "keep")); b != 1 {
		t.Errorf("the keep pod is gone (%d bound)", b)
	}
	for _, g := range names {
		waitEvent(t, ns, g, "GangPreempted", "preempted by gang "+ns+"/urgent")
	}
	waitEvent(t, ns, "urgent", "GangScheduled", "24 of minMember 24 pods placed in HyperNode psub-spine-1 (tier 2)")
}
