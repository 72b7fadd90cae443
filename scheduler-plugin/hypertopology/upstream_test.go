package hypertopology

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// A pod of an upstream Workload API pod group (spec.schedulingGroup) is refused in PreFilter with a
// message that names the group and the alternative, even when it also names a complete Volcano gang;
// it passes PreEnqueue (so the refusal reaches the pod's condition) and counts toward no gang.
func TestUpstreamPodGroupIsRefused(t *testing.T) {
	a0, a1 := pod("a-0", "a", 0, 1), pod("a-1", "a", 0, 1)
	upstream := pod("up-0", "", 0, 1)
	upstream.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}
	both := pod("both-0", "a", 0, 1) // the Volcano annotation too
	both.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("trainer")}

	p := testPlugin(t, []*schedulingv1beta1.PodGroup{pg("a", time.Now(), 3)}, []*corev1.Pod{a0, a1, upstream, both})

	if _, ok := gang.KeyOf(both); ok {
		t.Fatal("a pod with spec.schedulingGroup must belong to no Volcano gang")
	}
	if n := len(p.members(gang.Key{Namespace: "ns", Name: "a"})); n != 2 {
		t.Fatalf("gang a has %d members, want 2 (the upstream-group pod must not complete it)", n)
	}
	if st := p.PreEnqueue(context.Background(), a0); st.IsSuccess() {
		t.Fatal("gang a (2 of minMember 3) must stay gated")
	}
	for _, pd := range []*corev1.Pod{upstream, both} {
		if st := p.PreEnqueue(context.Background(), pd); !st.IsSuccess() {
			t.Fatalf("PreEnqueue(%s) = %v, want pass (the refusal belongs to PreFilter)", pd.Name, st)
		}
		res, st := p.PreFilter(context.Background(), framework.NewCycleState(), pd, nil)
		if res != nil || st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("PreFilter(%s) = %v, %v; want UnschedulableAndUnresolvable", pd.Name, res, st)
		}
		for _, want := range []string{ReasonUpstreamPodGroup, `"trainer"`, "spec.schedulingGroup", "Volcano PodGroup", gang.GroupNameAnnotation} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("PreFilter(%s) message %q lacks %q", pd.Name, st.Message(), want)
			}
		}
	}
}
