package hypertopology

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

func TestPreEnqueue(t *testing.T) {
	now := time.Now()
	a0, a1 := pod("a-0", "a", 0, 1), pod("a-1", "a", 0, 1)
	done := pod("a-done", "a", 0, 1)
	done.Status.Phase = corev1.PodSucceeded
	deleting := pod("a-del", "a", 0, 1)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	b0 := pod("b-0", "b", 0, 1)

	for _, tc := range []struct {
		name  string
		group int32 // minMember of PodGroup "a"; 0: no PodGroup
		pods  []*corev1.Pod
		pod   *corev1.Pod
		gated bool
	}{
		{"plain pod", 3, []*corev1.Pod{a0}, pod("plain", "", 0, 1), false},
		{"no PodGroup yet", 0, []*corev1.Pod{a0}, a0, false},
		{"incomplete", 3, []*corev1.Pod{a0, a1, b0, done, deleting}, a0, true},
		{"complete", 2, []*corev1.Pod{a0, a1, b0}, a1, false},
		{"minMember 0 counts as 1", -1, []*corev1.Pod{a0}, a0, false},
		{"PodGroup Pending (not enqueued)", 2, []*corev1.Pod{a0, a1}, a0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgs := []*schedulingv1beta1.PodGroup{}
			if tc.group != 0 {
				m := tc.group
				if m < 0 {
					m = 0
				}
				g := pg("a", now, m)
				if strings.Contains(tc.name, "Pending") {
					g.Status.Phase = schedulingv1beta1.PodGroupPending
				}
				pgs = append(pgs, g)
			}
			p := testPlugin(t, pgs, tc.pods)
			st := p.PreEnqueue(context.Background(), tc.pod)
			if gated := !st.IsSuccess(); gated != tc.gated {
				t.Fatalf("gated = %v (%v), want %v", gated, st, tc.gated)
			}
			if tc.gated && st.Code() != fwk.UnschedulableAndUnresolvable {
				t.Fatalf("code = %v, want UnschedulableAndUnresolvable", st.Code())
			}
		})
	}
}

// With waitForEnqueue (the default), a complete gang is held until its PodGroup has a phase that is
// not Pending, and the PodGroup handler re-activates it when it leaves "" or Pending; without it only
// Pending holds.
func TestPreEnqueueWaitsForEnqueue(t *testing.T) {
	now := time.Now()
	a0, a1 := pod("a-0", "a", 0, 1), pod("a-1", "a", 0, 1)
	for _, tc := range []struct {
		phase schedulingv1beta1.PodGroupPhase
		wait  bool
		gated bool
	}{
		{"", true, true},
		{"", false, false},
		{schedulingv1beta1.PodGroupPending, false, true},
		{schedulingv1beta1.PodGroupInqueue, true, false},
		{schedulingv1beta1.PodGroupRunning, true, false},
	} {
		t.Run(string(tc.phase)+"/"+map[bool]string{true: "wait", false: "no-wait"}[tc.wait], func(t *testing.T) {
			g := pg("a", now, 2)
			g.Status.Phase = tc.phase
			p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, []*corev1.Pod{a0, a1})
			p.waitForEnqueue = tc.wait
			st := p.PreEnqueue(context.Background(), a0)
			if gated := !st.IsSuccess(); gated != tc.gated {
				t.Fatalf("gated = %v (%v), want %v", gated, st, tc.gated)
			}
			if tc.gated && !strings.Contains(st.Message(), "waits for its PodGroup to be enqueued") {
				t.Fatalf("message %q does not say the gang waits for enqueue", st.Message())
			}
		})
	}
}
