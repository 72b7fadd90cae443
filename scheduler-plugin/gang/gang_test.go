package gang

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

func TestKeyOf(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	if _, ok := KeyOf(p); ok {
		t.Fatalf("pod without annotation has a gang")
	}
	p.Annotations = map[string]string{"scheduling.k8s.io/group-name": "pg"}
	if k, ok := KeyOf(p); !ok || k != (Key{"ns", "pg"}) || k.String() != "ns/pg" {
		t.Fatalf("KeyOf = %v, %v", k, ok)
	}
}

func TestSpecOfAndResolve(t *testing.T) {
	hasName := func(n string) bool { return n == "rack" || n == "spine" }
	pg := func(nt *schedulingv1beta1.NetworkTopologySpec) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg", UID: "u1", Generation: 3},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: 8, NetworkTopology: nt,
				MinResources: &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
		}
	}
	pod := func(ann ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		for i := 0; i+1 < len(ann); i += 2 {
			p.Annotations[ann[i]] = ann[i+1]
		}
		return p
	}
	tests := []struct {
		name    string
		pg      *schedulingv1beta1.PodGroup
		pod     *corev1.Pod
		want    *Limit // nil: no topology
		wantErr string
	}{
		{name: "no topology", pg: pg(nil), pod: pod()},
		{name: "hard tier", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(1)}), want: &Limit{Hard: true, Tier: 1}},
		{name: "mode defaults to hard", pg: pg(&schedulingv1beta1.NetworkTopologySpec{HighestTierAllowed: ptr.To(2)}), want: &Limit{Hard: true, Tier: 2}},
		{name: "hard tier name", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierName: "spine"}), want: &Limit{Hard: true, TierName: "spine"}},
		{name: "unknown tier name waits", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierName: "pod"}), wantErr: `highestTierName "pod" matches no`},
		{name: "hard without bound: any one HyperNode", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "hard"}), want: &Limit{Hard: true, AnyHyperNode: true}},
		{name: "soft ignores the tier", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "soft", HighestTierAllowed: ptr.To(1)}), want: &Limit{}},
		{name: "bad mode", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "firm"}), wantErr: "unknown network topology mode"},
		{name: "pod annotations when the PodGroup has none", pg: pg(nil),
			pod:  pod("volcano.sh/network-topology-mode", "hard", "volcano.sh/network-topology-highest-tier", "2"),
			want: &Limit{Hard: true, Tier: 2}},
		{name: "PodGroup wins over pod annotations", pg: pg(&schedulingv1beta1.NetworkTopologySpec{Mode: "soft"}),
			pod:  pod("volcano.sh/network-topology-mode", "hard", "volcano.sh/network-topology-highest-tier", "2"),
			want: &Limit{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := SpecOf(tc.pg, tc.pod)
			if s.MinMember != 8 || s.UID != "u1" || s.Placement != PlacementKey(tc.pg) || s.MinResources.Cpu().String() != "8" {
				t.Fatalf("spec = %+v", s)
			}
			if tc.want == nil && tc.wantErr == "" {
				if s.Topology != nil {
					t.Fatalf("topology = %+v, want none", s.Topology)
				}
				return
			}
			l, err := s.Topology.Resolve(hasName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || l.Hard != tc.want.Hard || l.Tier != tc.want.Tier || l.TierName != tc.want.TierName || l.AnyHyperNode != tc.want.AnyHyperNode || l.Describe == "" {
				t.Fatalf("Resolve = %+v, %v; want %+v", l, err, *tc.want)
			}
		})
	}
	if s := SpecOf(&schedulingv1beta1.PodGroup{}, nil); s.MinMember != 1 {
		t.Errorf("minMember 0 must count as 1, got %d", s.MinMember)
	}
}

// Volcano's job controller writes ResourceQuota-style minResources; only node resources are a floor.
func TestSpecOfMinResourcesFromVolcano(t *testing.T) {
	q := resource.MustParse
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-uid"},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 4, MinResources: &corev1.ResourceList{
			"count/pods": q("4"), "pods": q("4"), "requests.cpu": q("400m"), "cpu": q("400m"),
			"limits.nvidia.com/gpu": q("16"), "requests.nvidia.com/gpu": q("16"), "nvidia.com/gpu": q("16"),
		}}}
	got := SpecOf(pg, nil).MinResources
	want := corev1.ResourceList{"cpu": q("400m"), "nvidia.com/gpu": q("16")}
	if len(got) != len(want) {
		t.Fatalf("MinResources = %v, want %v", got, want)
	}
	for n, v := range want {
		if g, ok := got[n]; !ok || g.Cmp(v) != 0 {
			t.Fatalf("MinResources[%s] = %v, want %v (all: %v)", n, got[n], v, got)
		}
	}
	pg.Spec.MinResources = &corev1.ResourceList{"pods": q("4"), "count/pods": q("4")}
	if got := SpecOf(pg, nil).MinResources; got != nil {
		t.Fatalf("MinResources of counts only = %v, want nil", got)
	}
}

// Volcano's job controller writes minResources in ResourceQuota form as well; only node resources
// remain as the gang's demand.
func TestSpecOfKeepsNodeResources(t *testing.T) {
	min := corev1.ResourceList{
		"count/pods": resource.MustParse("9"), "pods": resource.MustParse("9"),
		"cpu": resource.MustParse("900m"), "requests.cpu": resource.MustParse("900m"),
		"requests.memory": resource.MustParse("576Mi"), "limits.cpu": resource.MustParse("2"),
		"requests.nvidia.com/gpu": resource.MustParse("2"),
	}
	pg := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{MinMember: 9, MinResources: &min}}
	got := SpecOf(pg, &corev1.Pod{}).MinResources
	want := corev1.ResourceList{"cpu": resource.MustParse("900m"),
		"memory": resource.MustParse("576Mi"), "nvidia.com/gpu": resource.MustParse("2")}
	if len(got) != len(want) {
		t.Fatalf("MinResources = %v, want %v", got, want)
	}
	for n, q := range want {
		if g, ok := got[n]; !ok || g.Cmp(q) != 0 {
			t.Errorf("MinResources[%s] = %v, want %v", n, got[n], q)
		}
	}
}

// PlacementKey changes with what placement depends on, and not with status or metadata writes
// (which bump the generation of a PodGroup: its CRD has no status subresource).
func TestPlacementKey(t *testing.T) {
	base := func() *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg", UID: "u1", Generation: 1},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: 8, Queue: "q",
				MinResources:    &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("64")},
				NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)}},
		}
	}
	k := PlacementKey(base())
	same := map[string]func(*schedulingv1beta1.PodGroup){
		"status write with a new generation": func(pg *schedulingv1beta1.PodGroup) {
			pg.Generation, pg.ResourceVersion = 7, "99"
			pg.Status = schedulingv1beta1.PodGroupStatus{Phase: schedulingv1beta1.PodGroupInqueue, Running: 3,
				Conditions: []schedulingv1beta1.PodGroupCondition{{Type: schedulingv1beta1.PodGroupUnschedulableType, Message: "x"}}}
		},
		"labels and annotations": func(pg *schedulingv1beta1.PodGroup) { pg.Labels = map[string]string{"a": "b"} },
		"the same quantity again": func(pg *schedulingv1beta1.PodGroup) {
			(*pg.Spec.MinResources)[corev1.ResourceCPU] = resource.MustParse("8000m")
		},
	}
	for name, mutate := range same {
		pg := base()
		mutate(pg)
		if PlacementKey(pg) != k {
			t.Errorf("%s changed the placement key", name)
		}
	}
	differ := map[string]func(*schedulingv1beta1.PodGroup){
		"minMember": func(pg *schedulingv1beta1.PodGroup) { pg.Spec.MinMember = 9 },
		"queue":     func(pg *schedulingv1beta1.PodGroup) { pg.Spec.Queue = "other" },
		"minResources": func(pg *schedulingv1beta1.PodGroup) {
			(*pg.Spec.MinResources)[corev1.ResourceCPU] = resource.MustParse("9")
		},
		"minResources unset": func(pg *schedulingv1beta1.PodGroup) { pg.Spec.MinResources = nil },
		"mode":               func(pg *schedulingv1beta1.PodGroup) { pg.Spec.NetworkTopology.Mode = "soft" },
		"highestTierAllowed": func(pg *schedulingv1beta1.PodGroup) { pg.Spec.NetworkTopology.HighestTierAllowed = ptr.To(3) },
		"highestTierName":    func(pg *schedulingv1beta1.PodGroup) { pg.Spec.NetworkTopology.HighestTierName = "spine" },
		"no networkTopology": func(pg *schedulingv1beta1.PodGroup) { pg.Spec.NetworkTopology = nil },
	}
	for name, mutate := range differ {
		pg := base()
		mutate(pg)
		if PlacementKey(pg) == k {
			t.Errorf("a change of %s kept the placement key", name)
		}
	}
}
