package hypertopology

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// fakeHandle serves the framework's waiting-pod list; every other Handle method panics (nil embed).
type fakeHandle struct {
	fwk.Handle
	mu        sync.Mutex
	waiting   map[types.UID]*fakeWaiting
	activated map[string]bool // namespace/name
}

type fakeWaiting struct {
	pod               *corev1.Pod
	allowed, rejected bool
}

func (w *fakeWaiting) GetPod() *corev1.Pod         { return w.pod }
func (w *fakeWaiting) GetPendingPlugins() []string { return []string{Name} }

// Allow, Reject and Preempt: the first decision wins, as with the framework's one-slot status
// channel; Reject and Preempt report whether they decided (false once the pod was decided).
func (w *fakeWaiting) Allow(string) { w.allowed = w.allowed || !w.rejected }
func (w *fakeWaiting) Reject(string, string) bool {
	if w.allowed || w.rejected {
		return false
	}
	w.rejected = true
	return true
}
func (w *fakeWaiting) Preempt(plugin, msg string) bool { return w.Reject(plugin, msg) }
func (h *fakeHandle) add(p *corev1.Pod) *fakeWaiting {
	w := &fakeWaiting{pod: p}
	h.waiting[p.UID] = w
	return w
}

// Activate records the pods moved back to the active queue.
func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.activated == nil {
		h.activated = map[string]bool{}
	}
	for k := range pods {
		h.activated[k] = true
	}
}

func (h *fakeHandle) IterateOverWaitingPods(fn func(fwk.WaitingPod)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiting {
		fn(w)
	}
}

func (h *fakeHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w, ok := h.waiting[uid]; ok {
		return w
	}
	return nil
}

func permitFixture(t *testing.T, minMember int32, names ...string) (*Plugin, *fakeHandle, []*corev1.Pod, fwk.CycleState) {
	t.Helper()
	g := pg("g", time.Now(), minMember)
	var pods []*corev1.Pod
	for _, n := range names {
		pods = append(pods, pod(n, "g", 0, 1))
	}
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, pods)
	h := &fakeHandle{waiting: map[types.UID]*fakeWaiting{}}
	p.handle = h
	spec := gang.SpecOf(g, nil)
	cs := framework.NewCycleState()
	cs.Write(stateKey, &state{key: spec.Key, spec: &spec, capacity: true})
	return p, h, pods, cs
}

// TestPermitIgnoresRejectedReservation: a reservation whose pod no longer waits at Permit (rejected
// or timed out, its Unreserve not run yet) must not complete the gang; otherwise Permit allows
// the other members and the gang binds partially.
func TestPermitIgnoresRejectedReservation(t *testing.T) {
	p, h, pods, cs := permitFixture(t, 3, "a", "b", "c")
	key := gang.Key{Namespace: "ns", Name: "g"}
	for i, m := range pods {
		p.res.Assume(key, m, []string{"n1", "n2", "n3"}[i])
	}
	// a was rejected and has left the waiting list; b still waits; c is in Permit now.
	wb := h.add(pods[1])
	st, _ := p.Permit(context.Background(), cs, pods[2], "n3")
	if st.Code() != fwk.Wait {
		t.Fatalf("Permit = %v, want Wait: only 2 of 3 members really hold a node", st)
	}
	if wb.allowed {
		t.Fatal("b was allowed although the gang is incomplete")
	}
	// Once a waits (not rejected), the gang is complete.
	h.add(pods[0])
	if st, _ := p.Permit(context.Background(), cs, pods[2], "n3"); !st.IsSuccess() || !wb.allowed {
		t.Fatalf("Permit = %v (b allowed %v), want success", st, wb.allowed)
	}
	// Allowed pods left the waiting list for binding and still count for a later member.
	h.waiting = map[types.UID]*fakeWaiting{}
	late := pod("d", "g", 0, 1)
	p.res.Assume(key, late, "n4")
	if st, _ := p.Permit(context.Background(), cs, late, "n4"); !st.IsSuccess() {
		t.Fatalf("late member: Permit = %v, want success (a, b, c are binding)", st)
	}
}

// TestRejectForgetsReservations: rejecting a gang's waiting pods forgets their reservations at once
// (under the gang lock), so a Permit that runs next cannot count them.
func TestRejectForgetsReservations(t *testing.T) {
	p, h, pods, cs := permitFixture(t, 3, "a", "b", "c")
	key := gang.Key{Namespace: "ns", Name: "g"}
	for i, m := range pods[:2] {
		p.res.Assume(key, m, []string{"n1", "n2"}[i])
		h.add(m)
	}
	if n := p.rejectWaiting(key, "", "test"); n != 2 {
		t.Fatalf("rejected %d, want 2", n)
	}
	if got := p.res.Assumed(key); len(got) != 0 {
		t.Fatalf("rejected reservations still tracked: %v", got)
	}
	// The rejected pods are still in the framework's list until their goroutines notice.
	p.res.Assume(key, pods[2], "n3")
	if st, _ := p.Permit(context.Background(), cs, pods[2], "n3"); st.Code() != fwk.Wait {
		t.Fatalf("Permit = %v, want Wait", st)
	}
}

// TestPermitSerializedWithReject runs Permit and the reject paths concurrently: whenever Permit
// allows the gang, no allowed pod may also have been rejected (run with -race).
func TestPermitSerializedWithReject(t *testing.T) {
	for i := 0; i < 200; i++ {
		p, h, pods, cs := permitFixture(t, 3, "a", "b", "c")
		key := gang.Key{Namespace: "ns", Name: "g"}
		for j, m := range pods {
			p.res.Assume(key, m, []string{"n1", "n2", "n3"}[j])
		}
		wa, wb := h.add(pods[0]), h.add(pods[1])
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			// What the framework does on a rejection: the pod leaves the waiting list, then Unreserve.
			p.rejectWaiting(key, pods[2].UID, "test")
			h.mu.Lock()
			delete(h.waiting, pods[0].UID)
			delete(h.waiting, pods[1].UID)
			h.mu.Unlock()
		}()
		st, _ := p.Permit(context.Background(), cs, pods[2], "n3")
		wg.Wait()
		if st.IsSuccess() && (wa.rejected || wb.rejected) {
			t.Fatalf("iteration %d: Permit allowed the gang while members were rejected", i)
		}
	}
}

// TestPodDeleteHintOwnGang: the scheduler's delete event for a reservation the plugin gave back is
// skipped for the same gang, but a real deletion of one of the gang's bound pods requeues it.
func TestPodDeleteHintOwnGang(t *testing.T) {
	p, h, pods, _ := permitFixture(t, 3, "a", "b", "c")
	key := gang.Key{Namespace: "ns", Name: "g"}
	p.res.Assume(key, pods[0], "n1")
	h.add(pods[0])
	p.rejectWaiting(key, "", "test")
	bound := func(p *corev1.Pod) *corev1.Pod { p = p.DeepCopy(); p.Spec.NodeName = "n1"; return p }
	logger := klog.Background()
	if got, _ := p.hintPodDelete(logger, pods[2], bound(pods[0]), nil); got != fwk.QueueSkip {
		t.Errorf("released reservation: hint %v, want QueueSkip", got)
	}
	if got, _ := p.hintPodDelete(logger, pods[2], bound(pods[1]), nil); got != fwk.Queue {
		t.Errorf("bound member deleted: hint %v, want Queue", got)
	}
}

// TestRevalidateDropsRootPlan: a root plan is not carried over to a new tree generation (the tree
// may have grown a tier, putting the root above the gang's highestTierAllowed); the next PreFilter
// must choose again with the limit check.
func TestRevalidateDropsRootPlan(t *testing.T) {
	p, h, pods, _ := permitFixture(t, 2, "a", "b")
	p.tree = topology.NewCache()
	p.tree.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	p.tree.AddOrUpdateHyperNode(leafHN("s1", "n1"))
	var gen int64
	p.tree.Read(func(tr topology.Tree) { gen = tr.Generation() })
	key := gang.Key{Namespace: "ns", Name: "g"}
	p.setPlan(key, &plan{pgUID: "uid-g", root: true, treeGen: gen, need: 2, describe: "the whole cluster"})
	p.res.Assume(key, pods[0], "n1")
	h.add(pods[0])

	p.tree.AddOrUpdateHyperNode(parentHN("spine", 2, "s1")) // the tree grows a tier
	p.revalidateWaiting(klog.Background())
	if pl := p.getPlan(key); pl != nil {
		t.Fatalf("root plan kept for the new tree (treeGen %d): the limit is not re-checked", pl.treeGen)
	}
	if h.waiting[pods[0].UID].rejected {
		t.Fatal("the waiting member was released; only the plan should be dropped")
	}
}
