package hypertopology

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	schedlisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/args"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// testPlugin is a Plugin over in-memory PodGroups and pods (no framework handle).
func testPlugin(t *testing.T, pgs []*schedulingv1beta1.PodGroup, pods []*corev1.Pod) *Plugin {
	t.Helper()
	pgIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pg := range pgs {
		if err := pgIdx.Add(pg); err != nil {
			t.Fatal(err)
		}
	}
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{gangIndex: indexByGang})
	for _, p := range pods {
		if err := podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	a, err := args.FromObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Plugin{args: a, handle: &fakeHandle{waiting: map[types.UID]*fakeWaiting{}}, pgLister: schedlisters.NewPodGroupLister(pgIdx), pods: podIdx, res: newReservations(), plans: map[gang.Key]*plan{}}
}

func pg(name string, created time.Time, minMember int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(created)}, Spec: schedulingv1beta1.PodGroupSpec{MinMember: minMember}}
}

func pod(name, group string, prio int32, gpus int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Priority: ptr.To(prio), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	if group != "" {
		p.Annotations = map[string]string{gang.GroupNameAnnotation: group}
	}
	return p
}

func queued(p *corev1.Pod, ts time.Time) fwk.QueuedPodInfo {
	return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: p}, Timestamp: ts}
}

func TestLess(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{pg("old", t0, 2), pg("new", t0.Add(time.Hour), 2)}, nil)
	oldA, oldB := queued(pod("z-old", "old", 0, 1), t0.Add(3*time.Hour)), queued(pod("a-old", "old", 0, 1), t0.Add(3*time.Hour))
	newA := queued(pod("a-new", "new", 0, 1), t0)
	plainEarly := queued(pod("plain", "", 0, 1), t0.Add(30*time.Minute))
	high := queued(pod("high", "new", 10, 1), t0.Add(5*time.Hour))
	missing := queued(pod("orphan", "nope", 0, 1), t0.Add(2*time.Hour))
	for _, tc := range []struct {
		name string
		a, b fwk.QueuedPodInfo
	}{
		{"priority first", high, oldA},
		{"older PodGroup before younger, whatever the pods' queue time", oldA, newA},
		{"within a gang by pod name", oldB, oldA},
		{"plain pods by queue time against PodGroup creation", plainEarly, newA},
		{"gang created before a plain pod's queue time", oldA, plainEarly},
		{"missing PodGroup counts from the pod's queue time", newA, missing},
	} {
		if !p.Less(tc.a, tc.b) || p.Less(tc.b, tc.a) {
			t.Errorf("%s: want %s before %s", tc.name, tc.a.GetPodInfo().GetPod().Name, tc.b.GetPodInfo().GetPod().Name)
		}
	}
}

func TestQueueingHints(t *testing.T) {
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{pg("g", time.Now(), 2)}, nil)
	logger := klog.Background()
	gp, plain := pod("p", "g", 0, 1), pod("q", "", 0, 1)
	bound := func(p *corev1.Pod) *corev1.Pod { p = p.DeepCopy(); p.Spec.NodeName = "n1"; return p }
	for _, tc := range []struct {
		name string
		fn   func() (fwk.QueueingHint, error)
		want fwk.QueueingHint
	}{
		{"assigned pod of another gang deleted", func() (fwk.QueueingHint, error) {
			return p.hintPodDelete(logger, gp, bound(pod("x", "other", 0, 1)), nil)
		}, fwk.Queue},
		{"assigned plain pod deleted", func() (fwk.QueueingHint, error) { return p.hintPodDelete(logger, gp, bound(plain), nil) }, fwk.Queue},
		{"own gang's reservation released", func() (fwk.QueueingHint, error) {
			p.res.noteReleased("uid-y")
			return p.hintPodDelete(logger, gp, bound(pod("y", "g", 0, 1)), nil)
		}, fwk.QueueSkip},
		{"own gang's bound pod deleted", func() (fwk.QueueingHint, error) { return p.hintPodDelete(logger, gp, bound(pod("w", "g", 0, 1)), nil) }, fwk.Queue},
		{"unscheduled pod deleted", func() (fwk.QueueingHint, error) { return p.hintPodDelete(logger, gp, pod("z", "other", 0, 1), nil) }, fwk.QueueSkip},
		{"not a gang pod", func() (fwk.QueueingHint, error) { return p.hintPodDelete(logger, plain, bound(gp), nil) }, fwk.QueueSkip},
		{"own PodGroup added", func() (fwk.QueueingHint, error) {
			u := &unstructured.Unstructured{}
			u.SetNamespace("ns")
			u.SetName("g")
			return p.hintPodGroup(logger, gp, nil, u)
		}, fwk.Queue},
		{"another PodGroup", func() (fwk.QueueingHint, error) {
			u := &unstructured.Unstructured{}
			u.SetNamespace("ns")
			u.SetName("h")
			return p.hintPodGroup(logger, gp, nil, u)
		}, fwk.QueueSkip},
		{"HyperNode change, gang without topology", func() (fwk.QueueingHint, error) { return p.hintTopologyGang(logger, gp, nil, nil) }, fwk.QueueSkip},
		{"node change, gang pod", func() (fwk.QueueingHint, error) { return p.hintGangPod(logger, gp, nil, nil) }, fwk.Queue},
		{"node change, plain pod", func() (fwk.QueueingHint, error) { return p.hintGangPod(logger, plain, nil, nil) }, fwk.QueueSkip},
	} {
		got, err := tc.fn()
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestDemand(t *testing.T) {
	g := pg("g", time.Now(), 4)
	g.Spec.MinResources = &corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("20")}
	members := []*corev1.Pod{pod("m0", "g", 0, 8), pod("m1", "g", 0, 2), pod("m2", "g", 0, 2), pod("m3", "g", 0, 2), pod("m4", "g", 0, 2)}
	members[0].Spec.NodeName = "n0" // bound
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{g}, members)
	key := gang.Key{Namespace: "ns", Name: "g"}
	p.res.Assume(key, members[1], "n1")
	spec := gang.SpecOf(g, nil)
	got := p.members(key)
	placed := p.res.Placed(key, got)
	d := p.demand(members[3], &spec, got, placed)
	// minMember 4 − 2 placed = 2 pods: the current pod first, then the first pending by name.
	if len(d.Pods) != 2 {
		t.Fatalf("demand has %d pods, want 2", len(d.Pods))
	}
	// minResources 20 GPUs − (8 bound + 2 reserved) = 10.
	if q := d.Min["nvidia.com/gpu"]; q.Value() != 10 {
		t.Fatalf("min GPUs = %s, want 10", q.String())
	}
	// Pods being deleted or finished are not members.
	members[4].DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if n := len(p.members(key)); n != 4 {
		t.Fatalf("members = %d, want 4", n)
	}
}

func TestEligibleFor(t *testing.T) {
	p := pod("p", "g", 0, 1)
	p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	ok := eligibleFor(p)
	node := func(mut func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "gpu"}}}
		if mut != nil {
			mut(n)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		want bool
	}{
		{"matching node", node(nil), true},
		{"nodeSelector mismatch", node(func(n *corev1.Node) { n.Labels["pool"] = "cpu" }), false},
		{"cordoned", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), false},
		{"tolerated taint", node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
		}), true},
		{"untolerated NoExecute", node(func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectNoExecute}} }), false},
		{"PreferNoSchedule is fine", node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
		}), true},
	} {
		if got := ok(tc.n); got != tc.want {
			t.Errorf("%s: eligible = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLessStableWhenPodGroupAppears: a gang pod's queue order must not change while it is queued
// when its PodGroup is created (the scheduler's heap would be corrupted), and the gang's time is
// forgotten with the PodGroup.
func TestLessStableWhenPodGroupAppears(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := testPlugin(t, nil, nil)
	pgIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p.pgLister = schedlisters.NewPodGroupLister(pgIdx)
	gangPod := queued(pod("a", "g", 0, 1), t0.Add(2*time.Hour))
	sibling := queued(pod("b", "g", 0, 1), t0.Add(4*time.Hour))
	plain := queued(pod("plain", "", 0, 1), t0.Add(time.Hour))
	before := p.Less(gangPod, plain)
	if before {
		t.Fatal("without a PodGroup the gang counts from its pod's queue time (after the plain pod)")
	}
	// The PodGroup appears, created long before both pods were queued.
	if err := pgIdx.Add(pg("g", t0, 2)); err != nil {
		t.Fatal(err)
	}
	if p.Less(gangPod, plain) != before || p.Less(plain, gangPod) == before {
		t.Fatal("the gang pod's order changed while it was queued")
	}
	// Every pod of the gang shares the gang's time: the sibling is not split off by its own time.
	if !p.Less(gangPod, sibling) || !p.Less(plain, sibling) {
		t.Fatal("gang pods are not kept together")
	}
	// The time is dropped with the PodGroup; a new one counts from its creation.
	p.onPodGroupDelete(pg("g", t0, 2))
	if !p.Less(gangPod, plain) {
		t.Fatal("after the PodGroup was deleted and re-read, the gang should count from its creation time")
	}
}
