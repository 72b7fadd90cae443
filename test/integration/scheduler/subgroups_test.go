package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// subGroupGang creates a PodGroup of parts sub-groups (policy "tp", matchLabelKeys [part]) of size
// pods each, with the sub-group topology sub and the gang topology nt, and its pods.
func subGroupGang(t *testing.T, test, ns, name string, parts, size int, minMember, minSubGroups int32, sub, nt *schedulingv1beta1.NetworkTopologySpec) {
	t.Helper()
	pg := builders.MakePodGroup(ns, name).MinMember(minMember).NetworkTopology(nt).Obj()
	pg.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "tp", SubGroupSize: ptr.To(int32(size)),
		MinSubGroups: ptr.To(minSubGroups), MatchLabelKeys: []string{"part"}, NetworkTopology: sub}}
	if err := env.Client.Create(ctxFor(t, 30*time.Second), pg); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
	var pods []*corev1.Pod
	for p := 0; p < parts; p++ {
		for i := 0; i < size; i++ {
			pod := gangPod(test, ns, name, fmt.Sprintf("%s-p%d-%02d", name, p, i))
			pod.Labels["part"] = fmt.Sprint(p)
			pods = append(pods, pod)
		}
	}
	createPods(t, pods...)
}

// filler binds a pod of gpus GPUs to node directly (no scheduler), to fragment the fabric.
func filler(t *testing.T, ns, name, node string, gpus int64) {
	t.Helper()
	pod := builders.MakeGangPod(ns, name, "", schedulerName).Label("group", "filler").GPUs(gpus).Obj()
	pod.Spec.NodeName = node
	createPods(t, pod)
}

// partRacks maps each sub-group of a gang's bound pods (the pod name without its index) to the
// racks holding them.
func partRacks(tr tree, got map[string]string) map[string]map[int]bool {
	out := map[string]map[int]bool{}
	for pod, node := range got {
		if node == "" {
			continue
		}
		part := pod[:strings.LastIndex(pod, "-")]
		if out[part] == nil {
			out[part] = map[int]bool{}
		}
		out[part][tr.rackOf[node]] = true
	}
	return out
}

// On a fragmented fabric (every spine has more free GPUs than the gang needs, but no spine has four
// racks' worth of 8-pod room), a gang of 4 sub-groups x 8 pods, hard at tier 1 per sub-group and
// tier 2 for the gang, waits with the numbers; a gang asking for minSubGroups 3 starts three of
// its sub-groups, each inside one rack; when a rack gets one more GPU free, the first gang lands
// with every sub-group in one rack and the gang in one spine; a soft sub-group too big for any
// rack falls back to a spine and says so.
func TestSubGroupsOnFragmentedFabric(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "subgroups"
	ns := namespace(t, "t-subgroups")
	tr := buildTree(t, test, 4, 3) // racks of 3 nodes = 24 one-GPU pods; spine-0 = racks 0,1; spine-1 = racks 2,3
	// Free: rack 0 15, rack 1 23 (spine-0 38, three sub-groups of 8); rack 2 15, rack 3 16 (spine-1 31).
	filler(t, ns, "f-r0a", tr.racks[0][0], 8)
	filler(t, ns, "f-r0b", tr.racks[0][1], 1)
	filler(t, ns, "f-r1", tr.racks[1][0], 1)
	filler(t, ns, "f-r2a", tr.racks[2][0], 8)
	filler(t, ns, "f-r2b", tr.racks[2][1], 1)
	filler(t, ns, "f-r3", tr.racks[3][0], 8)

	leaf := &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	subGroupGang(t, test, ns, "sg", 4, 8, 32, 0, leaf, hardTier(2))
	waitPodMessage(t, ns, "sg", "32 more pods needing", "in 4 required sub-group(s)",
		"no tier-1 domain has room for the 32 pods of the required sub-groups",
		"holds 3 of the 4 required sub-groups of 8 pods")
	waitEvent(t, ns, "sg", "GangWaiting", "in 4 required sub-group(s)", "holds 3 of the 4 required sub-groups of 8 pods")
	// The same in numbers, for kubectl hyperbatch why: spine-0 holds 3 of the 4 (rack-1 23, rack-0 15).
	var sgp *gangcontract.SubGroupPlacement
	waitFor(t, 30*time.Second, func() bool {
		pg := &schedulingv1beta1.PodGroup{}
		if err := env.Client.Get(ctxFor(t, 10*time.Second), client.ObjectKey{Namespace: ns, Name: "sg"}, pg); err != nil {
			return false
		}
		p, err := gangcontract.ParsePlacement(pg.Annotations[gangcontract.PlacementAnnotation])
		if err != nil || p.SubGroups == nil {
			return false
		}
		sgp = p.SubGroups
		return true
	}, "the placement annotation of sg with its sub-groups")
	if sgp.Required != 4 || sgp.Size != 8 || sgp.Holds != 3 || len(sgp.Domains) == 0 || sgp.Domains[0].HyperNode != "subgroups-spine-0" ||
		len(sgp.Domains[0].Rooms) != 2 || sgp.Domains[0].Rooms[0] != (gangcontract.NamedRoom{Name: "subgroups-rack-1", Room: 23}) {
		t.Fatalf("placement sub-groups %+v", sgp)
	}
	stayUnbound(t, ns, "sg", 2*time.Second)

	// minSubGroups 3 (minMember 24): Volcano's meaning, three sub-groups with subGroupSize pods
	// each start; the fourth finds no rack of its own beside them and waits.
	nsB := namespace(t, "t-subgroups-min3")
	subGroupGang(t, test, nsB, "ms3", 4, 8, 24, 3, leaf, hardTier(2))
	got := waitBound(t, nsB, "ms3", 24, 60*time.Second)
	parts := partRacks(tr, got)
	if len(parts) != 3 {
		t.Fatalf("minSubGroups 3: sub-groups bound %v, want three", parts)
	}
	spines := map[int]bool{}
	for part, racks := range parts {
		if len(racks) != 1 {
			t.Fatalf("sub-group %s spans racks %v", part, racks)
		}
		for r := range racks {
			spines[r/2] = true
		}
	}
	if len(spines) != 1 {
		t.Fatalf("minSubGroups 3: the gang spans spines %v", spines)
	}
	waitPodMessage(t, nsB, "ms3", "sub-group tp[", "is not needed to start the gang")
	waitEvent(t, nsB, "ms3", "GangScheduled", "24 of minMember 24 pods placed in HyperNode subgroups-spine-", "sub-groups tp[")
	if b := bound(placements(t, nsB, "ms3")); b != 24 {
		t.Fatalf("minSubGroups 3: %d pods bound, want 24", b)
	}
	stayUnbound(t, ns, "sg", time.Second)

	// Free the room: ms3 leaves and rack 2 gets one GPU back (16 free): spine-1 holds 4 sub-groups.
	deletePods(t, nsB, "ms3")
	if err := cs.CoreV1().Pods(ns).Delete(ctxFor(t, 30*time.Second), "f-r2b", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("delete filler: %v", err)
	}
	got = waitBound(t, ns, "sg", 32, 90*time.Second)
	parts = partRacks(tr, got)
	if len(parts) != 4 {
		t.Fatalf("sub-groups %v, want 4", parts)
	}
	for part, racks := range parts {
		if len(racks) != 1 {
			t.Fatalf("sub-group %s spans racks %v, want one", part, racks)
		}
		for r := range racks {
			if r/2 != 1 {
				t.Fatalf("sub-group %s in rack %d, outside spine-1 (the only spine holding four)", part, r)
			}
		}
	}
	waitEvent(t, ns, "sg", "GangScheduled", "32 of minMember 32 pods placed in HyperNode subgroups-spine-1 (tier 2)", "sub-groups tp[0] in subgroups-rack-")

	// Soft sub-group of 24 pods, wanting one rack: no rack has 24 free (rack 1 has 23), so it falls
	// back to spine-0 and the fallback is recorded.
	nsC := namespace(t, "t-subgroups-soft")
	softLeaf := &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.SoftNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	subGroupGang(t, test, nsC, "soft", 1, 24, 24, 1, softLeaf, hardTier(2))
	got = waitBound(t, nsC, "soft", 24, 60*time.Second)
	if r := tr.racksOf(got); len(r) != 2 || !r[0] || !r[1] {
		t.Fatalf("soft sub-group in racks %v, want racks 0 and 1 (spine-0)", r)
	}
	waitEvent(t, nsC, "soft", "SubGroupFallback", "sub-group tp[0] (soft, wants highestTierAllowed=1) placed in HyperNode subgroups-spine-0 (tier 2)")
}
