package gang

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

func i32(v int32) *int32 { return &v }

func podWith(l map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: l}}
}

// Pods are matched as Volcano v1.14 matches them: the first policy whose selector matches and whose
// matchLabelKeys all have non-empty values; one sub-group per tuple of values.
func TestSubGroupOf(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{MinMember: 8, SubGroupPolicy: []schedulingv1beta1.SubGroupPolicySpec{
		{Name: "workers", SubGroupSize: i32(4), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}, MatchLabelKeys: []string{"part", "zone"}},
		{Name: "any", MatchLabelKeys: []string{"part"}},
	}}}
	spec := SpecOf(pg, nil)
	if spec.SubGroupErr != nil {
		t.Fatal(spec.SubGroupErr)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   string
		ok     bool
	}{
		{map[string]string{"role": "worker", "part": "1", "zone": "a"}, "workers[1/a]", true},
		{map[string]string{"role": "worker", "part": "1"}, "any[1]", true}, // zone missing: the next policy
		{map[string]string{"role": "worker", "part": "1", "zone": ""}, "any[1]", true},
		{map[string]string{"role": "ps", "part": "2", "zone": "a"}, "any[2]", true},
		{map[string]string{"role": "ps"}, "", false},
	} {
		g, ok := SubGroupOf(spec.SubGroups, podWith(tc.labels))
		if ok != tc.ok || (ok && g.Name(spec.SubGroups) != tc.want) {
			t.Errorf("%v: got %v %v, want %q %v", tc.labels, g.Name(spec.SubGroups), ok, tc.want, tc.ok)
		}
	}
	if spec.SubGroups[0].Size != 4 || spec.SubGroups[1].Size != 1 {
		t.Errorf("sizes %d %d, want 4 and the default 1", spec.SubGroups[0].Size, spec.SubGroups[1].Size)
	}
}

func TestSubGroupPolicyRefusals(t *testing.T) {
	for _, tc := range []struct {
		sp   schedulingv1beta1.SubGroupPolicySpec
		want string
	}{
		{schedulingv1beta1.SubGroupPolicySpec{Name: "a"}, "spec.subGroupPolicy[0] (a) has no matchLabelKeys"},
		{schedulingv1beta1.SubGroupPolicySpec{MatchLabelKeys: []string{"k"}}, "spec.subGroupPolicy[0] has no name"},
		{schedulingv1beta1.SubGroupPolicySpec{Name: "a", MatchLabelKeys: []string{"k"}, SubGroupSize: i32(0)}, "subGroupSize is 0"},
		{schedulingv1beta1.SubGroupPolicySpec{Name: "a", MatchLabelKeys: []string{"k"},
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{HighestTierAllowed: func() *int { v := 1; return &v }(), HighestTierName: "leaf"}}, "sets both highestTierAllowed and highestTierName"},
	} {
		spec := SpecOf(&schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{SubGroupPolicy: []schedulingv1beta1.SubGroupPolicySpec{tc.sp}}}, nil)
		if spec.SubGroupErr == nil || !strings.Contains(spec.SubGroupErr.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.sp, spec.SubGroupErr, tc.want)
		}
	}
}

// minTaskMember applies as in Volcano: ignored whole when it asks for more than minMember.
func TestTaskMins(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{MinMember: 3, MinTaskMember: map[string]int32{"ps": 1, "worker": 2}}}
	if m := TaskMins(pg); m["ps"] != 1 || m["worker"] != 2 {
		t.Errorf("got %v", m)
	}
	pg.Spec.MinMember = 2
	if m := TaskMins(pg); m != nil {
		t.Errorf("sum above minMember: got %v, want nil", m)
	}
	a := PlacementKey(pg)
	pg.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "x", MatchLabelKeys: []string{"k"}}}
	if PlacementKey(pg) == a {
		t.Error("subGroupPolicy does not change the placement key")
	}
}
