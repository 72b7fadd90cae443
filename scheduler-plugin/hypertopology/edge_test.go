package hypertopology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Deleting a PodGroup releases its members waiting at Permit at once (not at the Permit timeout).
func TestPodGroupDeleteReleasesReservations(t *testing.T) {
	p, h, pods, _ := permitFixture(t, 3, "a", "b", "c")
	key := gang.Key{Namespace: "ns", Name: "g"}
	for i, m := range pods[:2] {
		p.res.Assume(key, m, fmt.Sprintf("n%d", i))
		h.add(m)
	}
	p.events = newRecorder(nil)
	p.onPodGroupDelete(pg("g", time.Now(), 3))
	assert.True(t, h.waiting[pods[0].UID].rejected, "a released")
	assert.True(t, h.waiting[pods[1].UID].rejected, "b released")
	assert.Zero(t, len(p.res.Assumed(key)), "reservations forgotten")
}

// A node that leaves the cluster re-plans every gang waiting on it, also gangs with no plan (no
// networkTopology) and gangs planned on the cluster root.
func TestNodeLeavingReleasesWaitingGang(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan *plan
	}{
		{"no plan", nil},
		{"root plan", &plan{pgUID: "uid-g", root: true, need: 2, describe: "the whole cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, h, pods, _ := permitFixture(t, 3, "a", "b", "c")
			p.tree = topology.NewCache()
			for _, n := range []string{"n1", "n2"} {
				p.tree.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
			p.tree.AddOrUpdateHyperNode(leafHN("s1", "n1", "n2"))
			key := gang.Key{Namespace: "ns", Name: "g"}
			if tc.plan != nil {
				p.tree.Read(func(tr topology.Tree) { tc.plan.treeGen = tr.Generation() })
				p.setPlan(key, tc.plan)
			}
			p.res.Assume(key, pods[0], "n1")
			p.res.Assume(key, pods[1], "n2")
			wa, wb := h.add(pods[0]), h.add(pods[1])

			p.revalidateWaiting(klog.Background()) // nothing changed: nothing released
			require.False(t, wa.rejected || wb.rejected, "released without a change")

			p.tree.DeleteNode("n2")
			p.revalidateWaiting(klog.Background())
			assert.True(t, wa.rejected && wb.rejected, "the gang waiting on the deleted node n2 is released")
			assert.Zero(t, len(p.res.Assumed(key)), "reservations forgotten")
			assert.Nil(t, p.getPlan(key), "plan dropped")
			assert.True(t, h.activated["ns/a"] && h.activated["ns/c"], "the gang's pods are re-activated (a node deletion is no requeueing event)")
		})
	}
}

// releaseYounger never releases pods Permit has already allowed (they may still be listed as
// waiting until their binding goroutine runs): their reservations stay counted; the younger gang's
// other waiting pods are released.
func TestReleaseYoungerKeepsAllowedPods(t *testing.T) {
	t0 := time.Now()
	old, young := pg("old", t0, 1), pg("young", t0.Add(time.Minute), 3)
	o1 := pod("o1", "old", 0, 1)
	y1, y2 := pod("y1", "young", 0, 1), pod("y2", "young", 0, 1)
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{old, young}, []*corev1.Pod{o1, y1, y2})
	p.tree = topology.NewCache()
	p.tree.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})

	// n1 has 2 GPUs, both reserved by the younger gang: y1 allowed (binding), y2 waiting.
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}}})
	for _, y := range []*corev1.Pod{y1, y2} {
		b := y.DeepCopy()
		b.Spec.NodeName = "n1"
		ni.AddPod(b)
	}
	h := &snapshotHandle{fakeHandle: fakeHandle{waiting: map[types.UID]*fakeWaiting{}}, nodes: []fwk.NodeInfo{ni}}
	p.handle = h
	yk := gang.Key{Namespace: "ns", Name: "young"}
	p.res.Assume(yk, y1, "n1")
	p.res.Assume(yk, y2, "n1")
	w1, w2 := h.add(y1), h.add(y2)
	w1.allowed = true
	p.res.MarkAllowed(yk, y1.UID)

	spec := gang.SpecOf(old, o1)
	msg, ok := p.releaseYounger(context.Background(), o1, &spec)
	require.True(t, ok, "the older gang fits once y2 is released: %s", msg)
	assert.True(t, w2.rejected, "y2 (waiting) released")
	assert.False(t, w1.rejected, "y1 (allowed) must not be rejected")
	got := p.res.Assumed(yk)
	assert.Contains(t, got, y1.UID, "the allowed pod's reservation stays counted")
	assert.NotContains(t, got, y2.UID)
}

// queueTimes forgets a gang once its last pod is gone, also when its PodGroup never appeared.
func TestQueueTimesBounded(t *testing.T) {
	orphan := pod("orphan", "never", 0, 1)
	p := testPlugin(t, nil, []*corev1.Pod{orphan})
	key := gang.Key{Namespace: "ns", Name: "never"}
	p.gangQueueTime(key, queued(orphan, time.Now()))
	require.Contains(t, p.queueTimes, key)

	require.NoError(t, p.pods.Delete(orphan))
	p.onPodDelete(orphan)
	assert.NotContains(t, p.queueTimes, key)
	assert.Empty(t, p.queueTimes)
}

// A gang with fewer than minMember pods bound and nothing in flight (a binding failed after Permit,
// or the scheduler restarted mid-gang) is reported with a GangPartlyBound Event and completed; a
// gang whose other members are still reserved is not reported.
func TestPartlyBoundGangReported(t *testing.T) {
	g := pg("g", time.Now(), 4)
	var pods []*corev1.Pod
	for i, n := range []string{"a", "b", "c", "d"} {
		m := pod(n, "g", 0, 1)
		if i < 2 {
			m.Spec.NodeName = fmt.Sprintf("n%d", i)
		}
		pods = append(pods, m)
	}
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, pods)
	rec := &captureRecorder{}
	p.events = newRecorder(rec)

	// Another member is still reserved (in flight): not partly bound.
	key := gang.Key{Namespace: "ns", Name: "g"}
	p.res.Assume(key, pods[3], "n3")
	_, st := p.PreFilter(context.Background(), framework.NewCycleState(), pods[2], nil)
	require.True(t, st.IsSuccess(), "PreFilter: %v", st)
	assert.Empty(t, rec.reasons(ReasonGangPartlyBound))

	p.res.Forget(key, pods[3].UID) // the reservation failed to bind
	_, st = p.PreFilter(context.Background(), framework.NewCycleState(), pods[2], nil)
	require.True(t, st.IsSuccess(), "PreFilter: %v", st)
	notes := rec.reasons(ReasonGangPartlyBound)
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "has 2 of its minMember 4 pods bound")
	assert.Contains(t, notes[0], "completing it")
}

// snapshotHandle adds a scheduler snapshot of nodes to fakeHandle.
type snapshotHandle struct {
	fakeHandle
	nodes []fwk.NodeInfo
}

func (h *snapshotHandle) SnapshotSharedLister() fwk.SharedLister { return fakeLister{h.nodes} }

type fakeLister struct{ nodes []fwk.NodeInfo }

func (l fakeLister) NodeInfos() fwk.NodeInfoLister       { return fakeNodeInfos(l) }
func (l fakeLister) StorageInfos() fwk.StorageInfoLister { return nil }

// PodGroupStates (the upstream Workload API's pod groups, 1.36+) is not read by the plugin.
func (l fakeLister) PodGroupStates() fwk.PodGroupStateLister { return nil }

type fakeNodeInfos struct{ nodes []fwk.NodeInfo }

func (l fakeNodeInfos) List() ([]fwk.NodeInfo, error)                     { return l.nodes, nil }
func (l fakeNodeInfos) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) { return nil, nil }
func (l fakeNodeInfos) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l fakeNodeInfos) Get(name string) (fwk.NodeInfo, error) {
	for _, n := range l.nodes {
		if n.Node().Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %s not found", name)
}

// captureRecorder records Events (events.EventRecorder).
type captureRecorder struct {
	mu  sync.Mutex
	got []string // reason + "\x00" + note
}

func (r *captureRecorder) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, note string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, reason+"\x00"+fmt.Sprintf(note, args...))
}

func (r *captureRecorder) reasons(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.got {
		if len(g) > len(reason) && g[:len(reason)+1] == reason+"\x00" {
			out = append(out, g[len(reason)+1:])
		}
	}
	return out
}

// Two reasons that alternate on every attempt are throttled separately: each message is sent once
// per minute, not once per attempt.
func TestRecorderThrottlesPerReason(t *testing.T) {
	rec := &captureRecorder{}
	r := newRecorder(rec)
	spec := gang.SpecOf(pg("g", time.Now(), 2), nil)
	for i := 0; i < 5; i++ {
		r.gang(&spec, nil, corev1.EventTypeWarning, ReasonGangPartlyBound, "partly bound")
		r.gang(&spec, nil, corev1.EventTypeWarning, ReasonGangWaiting, "waits")
	}
	assert.Len(t, rec.reasons(ReasonGangPartlyBound), 1)
	assert.Len(t, rec.reasons(ReasonGangWaiting), 1)
	r.forget(spec.Key)
	r.gang(&spec, nil, corev1.EventTypeWarning, ReasonGangWaiting, "waits")
	assert.Len(t, rec.reasons(ReasonGangWaiting), 2, "forgotten with the PodGroup")
}

// PreFilter's GangWaiting (no domain has room) and PostFilter's (cannot preempt) alternate on every
// attempt of every member pod; each message is still sent once per minute, not once per attempt
// (issue 38: 8 identical Events in 0.5 s when the throttle kept only the last message per reason).
func TestRecorderThrottlesAlternatingMessages(t *testing.T) {
	rec := &captureRecorder{}
	r := newRecorder(rec)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	spec := gang.SpecOf(pg("g", now, 8), nil)
	for i := 0; i < 8; i++ {
		r.gang(&spec, nil, corev1.EventTypeWarning, ReasonGangWaiting, "no tier-1 HyperNode has room")
		r.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting, "cannot preempt")
	}
	assert.Equal(t, []string{"no tier-1 HyperNode has room", "cannot preempt"}, rec.reasons(ReasonGangWaiting))

	now = now.Add(repeatAfter - time.Second)
	r.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting, "cannot preempt")
	assert.Len(t, rec.reasons(ReasonGangWaiting), 2, "within the minute")
	now = now.Add(2 * time.Second)
	r.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting, "cannot preempt")
	assert.Len(t, rec.reasons(ReasonGangWaiting), 3, "again after a minute")

	// Messages that carry changing counts do not pile up: entries older than a minute are swept.
	for i := 0; i < 100; i++ {
		r.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting, fmt.Sprintf("waits for %d preempted pod(s)", i))
	}
	now = now.Add(2 * repeatAfter)
	r.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting, "cannot preempt")
	r.mu.Lock()
	assert.Len(t, r.last, 1)
	r.mu.Unlock()
}

// A node holding a gang's reservations at Permit that the node controller finds not Ready (its
// kubelet stopped: node.kubernetes.io/unreachable:NoSchedule) releases and re-plans the gang, as a
// node leaving the cluster does: binding it would put pods on a node that cannot run them (issue
// 36). A gang Permit already allowed is left alone (its pods are binding), and so is a pod that
// tolerates the taint.
func TestNotReadyNodeReleasesWaitingGang(t *testing.T) {
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	setup := func(t *testing.T) (*Plugin, *fakeHandle, []*corev1.Pod, cache.Indexer) {
		p, h, pods, _ := permitFixture(t, 3, "a", "b", "c")
		p.tree = topology.NewCache()
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, n := range []string{"n1", "n2"} {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}
			p.tree.AddOrUpdateNode(node)
			require.NoError(t, idx.Add(node))
		}
		p.tree.AddOrUpdateHyperNode(leafHN("s1", "n1", "n2"))
		p.nodes = corelisters.NewNodeLister(idx)
		key := gang.Key{Namespace: "ns", Name: "g"}
		p.res.Assume(key, pods[0], "n1")
		p.res.Assume(key, pods[1], "n2")
		return p, h, pods, idx
	}
	taint := func(t *testing.T, idx cache.Indexer, name string, taints ...corev1.Taint) {
		require.NoError(t, idx.Update(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}))
	}
	key := gang.Key{Namespace: "ns", Name: "g"}

	t.Run("released", func(t *testing.T) {
		p, h, pods, idx := setup(t)
		wa, wb := h.add(pods[0]), h.add(pods[1])
		p.revalidateWaiting(klog.Background())
		require.False(t, wa.rejected || wb.rejected, "released while both nodes are Ready")
		// A user's NoSchedule taint does not release a reservation (kube-scheduler binds through it too).
		taint(t, idx, "n2", corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})
		p.revalidateWaiting(klog.Background())
		require.False(t, wa.rejected || wb.rejected, "released for a taint other than the node controller's")

		taint(t, idx, "n2", unreachable, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
		p.revalidateWaiting(klog.Background())
		assert.True(t, wa.rejected && wb.rejected, "the whole gang waiting on the unreachable n2 is released")
		assert.Zero(t, len(p.res.Assumed(key)), "reservations forgotten")
		assert.True(t, h.activated["ns/a"] && h.activated["ns/b"] && h.activated["ns/c"], "the gang's pods are re-activated")
		assert.Equal(t, "", func() string { n, _ := p.notReadyReservation(key); return n }(), "nothing reserved any more")
	})
	t.Run("allowed gang kept", func(t *testing.T) {
		p, h, pods, idx := setup(t)
		wa, wb := h.add(pods[0]), h.add(pods[1])
		wa.allowed, wb.allowed = true, true
		p.res.MarkAllowed(key, pods[0].UID)
		p.res.MarkAllowed(key, pods[1].UID)
		taint(t, idx, "n2", unreachable)
		p.revalidateWaiting(klog.Background())
		assert.False(t, wa.rejected || wb.rejected, "an allowed gang is binding: never released")
		assert.Len(t, p.res.Assumed(key), 2)
	})
	t.Run("tolerated", func(t *testing.T) {
		p, h, pods, idx := setup(t)
		for _, pd := range pods[:2] {
			pd.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}}
		}
		wa, wb := h.add(pods[0]), h.add(pods[1])
		taint(t, idx, "n2", unreachable)
		p.revalidateWaiting(klog.Background())
		assert.False(t, wa.rejected || wb.rejected, "pods that tolerate the taint keep their reservations")
	})
	t.Run("not-ready names the node", func(t *testing.T) {
		p, _, _, idx := setup(t)
		taint(t, idx, "n1", corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
		n, tn := p.notReadyReservation(key)
		assert.Equal(t, "n1", n)
		assert.Equal(t, "node.kubernetes.io/not-ready:NoSchedule", tn)
	})
}
