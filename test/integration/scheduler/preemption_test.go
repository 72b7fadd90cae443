package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const (
	lowPriority  = "hb-preempt-low"  // 100
	highPriority = "hb-preempt-high" // 1000
)

// priorityClasses creates the two PriorityClasses the preemption tests use (shared, kept).
func priorityClasses(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for name, v := range map[string]int32{lowPriority: 100, highPriority: 1000} {
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, builders.PriorityClass(name, v), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create PriorityClass %s: %v", name, err)
		}
	}
}

// prioGang creates a gang of n one-GPU pods of the priority class, with a hard tier limit.
func prioGang(t *testing.T, test, ns, name string, n, tier int, class string) {
	t.Helper()
	podGroup(t, ns, name, int32(n), hardTier(tier))
	pods := gangPods(test, ns, name, n)
	for _, p := range pods {
		p.Spec.PriorityClassName = class
	}
	createPods(t, pods...)
}

// deletions records the pods deleted in a namespace, with their last state, from a watch opened
// before the preemptor arrives.
type deletions struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func watchDeletions(t *testing.T, ns string) *deletions {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	d := &deletions{pods: map[string]*corev1.Pod{}}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
				d.mu.Lock()
				d.pods[p.Name] = p
				d.mu.Unlock()
			}
		}
	}()
	return d
}

// settled waits until every gang that lost a pod has lost them all (the scheduler evicts in the
// background and the preemptor may bind before the last victim is gone), then returns the
// deletions; a gang left partly running fails the test.
func (d *deletions) settled(t *testing.T, ns string) map[string]*corev1.Pod {
	t.Helper()
	var left map[string]int
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		left = map[string]int{}
		for name := range d.snapshot() {
			g := gangOfPod(name)
			if _, seen := left[g]; !seen {
				if n := len(placements(t, ns, g)); n > 0 {
					left[g] = n
				}
			}
		}
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("victim gangs left partly running (gang: pods left): %v", left)
	}
	return d.snapshot()
}

func (d *deletions) snapshot() map[string]*corev1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]*corev1.Pod, len(d.pods))
	for k, v := range d.pods {
		out[k] = v
	}
	return out
}

// gangOfPod is the gang name of a test pod named <gang>-NNN.
func gangOfPod(name string) string { return name[:strings.LastIndex(name, "-")] }

// leafCost is a brute-force reference for a cluster full of one priority: clearing a rack evicts
// every gang with a pod in it (each whole); the cheapest rack has the fewest gangs, then pods.
type leafCost struct {
	rack        int
	gangs, pods int
	victims     []string
}

func rackCosts(tr tree, gangs map[string]map[string]string) []leafCost {
	var out []leafCost
	for r := range tr.racks {
		c := leafCost{rack: r}
		for g, pl := range gangs {
			if tr.racksOf(pl)[r] {
				c.gangs++
				c.pods += len(pl)
				c.victims = append(c.victims, g)
			}
		}
		sort.Strings(c.victims)
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].gangs != out[j].gangs {
			return out[i].gangs < out[j].gangs
		}
		return out[i].pods < out[j].pods
	})
	return out
}

// TestGangPreemptionClearsOneLeaf: 4 racks × 8 nodes × 8 GPUs full of low-priority gangs of 8 and
// 32; a high-priority gang of 64 limited to tier 1 clears exactly one rack, evicting the fewest
// gangs (checked against every rack's cost), each whole, and binds there.
func TestGangPreemptionClearsOneLeaf(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "pleaf"
	ns := namespace(t, "t-pleaf")
	tr := buildTree(t, test, 4, 8)

	// Fill: 4 gangs of 32 and 16 of 8 (256 GPUs), one by one so each lands before the next.
	gangs := map[string]map[string]string{}
	// Best fit packs them unevenly: two gangs of 32 share rack 0, rack 1 gets one and four of 8,
	// rack 2 the same, rack 3 eight of 8; so clearing racks costs 2, 5, 5 and 8 gangs.
	order := []string{"big0", "big1", "big2", "small00", "small01", "small02", "small03", "big3",
		"small04", "small05", "small06", "small07", "small08", "small09", "small10", "small11", "small12", "small13", "small14", "small15"}
	for _, g := range order {
		n := 8
		if strings.HasPrefix(g, "big") {
			n = 32
		}
		prioGang(t, test, ns, g, n, 1, lowPriority)
		gangs[g] = waitBound(t, ns, g, n, 60*time.Second)
	}
	costs := rackCosts(tr, gangs)
	best := costs[0]
	t.Logf("rack costs (gangs, pods): %+v", costs)
	if costs[0].gangs == costs[len(costs)-1].gangs {
		t.Fatalf("every rack costs the same (%+v): the fill does not test the choice", costs)
	}

	del := watchDeletions(t, ns)
	before := preemptionMetrics(t)
	prioGang(t, test, ns, "urgent", 64, 1, highPriority)
	got := waitBound(t, ns, "urgent", 64, 120*time.Second)
	racks := tr.racksOf(got)
	if len(racks) != 1 {
		t.Fatalf("urgent gang spans racks %v, want one", racks)
	}
	var rack int
	for r := range racks {
		rack = r
	}
	// The cleared rack is one of least cost; its victims are exactly the gangs in it.
	var cleared leafCost
	for _, c := range costs {
		if c.rack == rack {
			cleared = c
		}
	}
	if cleared.gangs != best.gangs || cleared.pods != best.pods {
		t.Fatalf("cleared rack %d costs %d gangs / %d pods; the cheapest rack %d costs %d / %d", rack, cleared.gangs, cleared.pods, best.rack, best.gangs, best.pods)
	}
	waitEvent(t, ns, "urgent", "GangPreempting", fmt.Sprintf("to clear HyperNode %s (tier 1)", tr.rack(rack)))

	// Every victim gang is gone whole; every other gang still runs whole.
	deleted := del.settled(t, ns)
	victimGangs := map[string]int{}
	for name, p := range deleted {
		g := gangOfPod(name)
		victimGangs[g]++
		if !hasDisruptionTarget(p) {
			t.Errorf("victim %s has no DisruptionTarget condition: %+v", name, p.Status.Conditions)
		}
	}
	var vg []string
	for g, n := range victimGangs {
		vg = append(vg, g)
		if n != len(gangs[g]) {
			t.Errorf("gang %s lost %d of its %d pods: partly evicted", g, n, len(gangs[g]))
		}
	}
	sort.Strings(vg)
	if strings.Join(vg, ",") != strings.Join(cleared.victims, ",") {
		t.Fatalf("victims %v, want exactly the gangs of rack %d: %v", vg, rack, cleared.victims)
	}
	for g, pl := range gangs {
		if victimGangs[g] > 0 {
			waitEvent(t, ns, g, "GangPreempted", "preempted by gang "+ns+"/urgent")
			continue
		}
		if now := placements(t, ns, g); bound(now) != len(pl) {
			t.Errorf("gang %s was not a victim yet has %d of %d pods bound", g, bound(now), len(pl))
		}
	}
	waitPodEvent(t, ns, cleared.victims[0], "Preempted", "preempted by gang "+ns+"/urgent")
	after := preemptionMetrics(t)
	if d := after.sub(before); d != (preemptionCounts{preemptions: 1, victimPods: float64(len(deleted)), tier1: 1}) {
		t.Fatalf("metrics moved by %+v, want one preemption of %d pods at tier 1", d, len(deleted))
	}
}

type preemptionCounts struct{ preemptions, victimPods, tier1 float64 }

func (a preemptionCounts) sub(b preemptionCounts) preemptionCounts {
	return preemptionCounts{a.preemptions - b.preemptions, a.victimPods - b.victimPods, a.tier1 - b.tier1}
}

// preemptionMetrics reads the plugin's preemption metrics from the in-process scheduler.
func preemptionMetrics(t *testing.T) preemptionCounts {
	t.Helper()
	var c preemptionCounts
	for _, m := range []struct {
		name   string
		labels map[string]string
		into   *float64
	}{
		{"hyperbatch_scheduler_gang_preemptions_total", nil, &c.preemptions},
		{"hyperbatch_scheduler_gang_preemption_victim_pods", nil, &c.victimPods},
		{"hyperbatch_scheduler_gang_preemption_domain_tier_total", map[string]string{"tier": "1"}, &c.tier1},
	} {
		v, err := framework.ComponentMetric(m.name, m.labels)
		if err != nil {
			t.Fatal(err)
		}
		*m.into = v
	}
	return c
}

// TestGangPreemptionClearsOneSpine: no rack holds the gang (48 > 32 GPUs), highestTierAllowed 2:
// one spine is cleared, the one with the fewest victim gangs.
func TestGangPreemptionClearsOneSpine(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "pspine"
	ns := namespace(t, "t-pspine")
	tr := buildTree(t, test, 4, 4) // racks of 32 GPUs, spines of 64
	gangs := map[string]map[string]string{}
	// Spine 0 gets two gangs of 32 (racks 0 and 1, best fit); spine 1 eight gangs of 8.
	for _, g := range []string{"big0", "big1"} {
		prioGang(t, test, ns, g, 32, 1, lowPriority)
		gangs[g] = waitBound(t, ns, g, 32, 60*time.Second)
	}
	for i := 0; i < 8; i++ {
		g := fmt.Sprintf("small%d", i)
		prioGang(t, test, ns, g, 8, 1, lowPriority)
		gangs[g] = waitBound(t, ns, g, 8, 60*time.Second)
	}
	spineOf := func(pl map[string]string) map[int]bool {
		out := map[int]bool{}
		for r := range tr.racksOf(pl) {
			out[r/2] = true
		}
		return out
	}
	// Reference: the spine with the fewest gangs whose eviction frees 48 GPUs there.
	perSpine := map[int][]string{}
	for g, pl := range gangs {
		for s := range spineOf(pl) {
			perSpine[s] = append(perSpine[s], g)
		}
	}
	del := watchDeletions(t, ns)
	prioGang(t, test, ns, "urgent", 48, 2, highPriority)
	got := waitBound(t, ns, "urgent", 48, 120*time.Second)
	sp := spineOf(got)
	if len(sp) != 1 {
		t.Fatalf("urgent gang spans spines %v", sp)
	}
	deleted := del.settled(t, ns)
	victims := map[string]int{}
	for name := range deleted {
		victims[gangOfPod(name)]++
	}
	for g, n := range victims {
		if n != len(gangs[g]) {
			t.Errorf("gang %s lost %d of its %d pods: partly evicted", g, n, len(gangs[g]))
		}
	}
	// Spine 0 needs both gangs of 32 (2 victims); spine 1 needs six gangs of 8 (6 victims).
	if len(victims) != 2 || victims["big0"] == 0 || victims["big1"] == 0 {
		t.Fatalf("victims %v, want exactly big0 and big1 (2 gangs; spine 1 would need 6 gangs of 8)", victims)
	}
	waitEvent(t, ns, "urgent", "GangPreempting", "(tier 2)")
}

// TestGangPreemptionEqualPriority: a gang of the same priority as the running ones never preempts;
// it waits with the reason, and nothing is evicted.
func TestGangPreemptionEqualPriority(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "pequal"
	ns := namespace(t, "t-pequal")
	buildTree(t, test, 2, 4)
	for _, g := range []string{"run0", "run1"} {
		prioGang(t, test, ns, g, 32, 1, highPriority)
		waitBound(t, ns, g, 32, 60*time.Second)
	}
	del := watchDeletions(t, ns)
	prioGang(t, test, ns, "same", 16, 1, highPriority)
	waitPodMessage(t, ns, "same", "cannot preempt", "no running pod has a priority below 1000")
	waitEvent(t, ns, "same", "GangWaiting", "cannot preempt")
	for _, g := range []string{"run0", "run1"} {
		if b := bound(placements(t, ns, g)); b != 32 {
			t.Fatalf("gang %s has %d of 32 pods bound after an equal-priority gang arrived", g, b)
		}
	}
	if d := del.snapshot(); len(d) != 0 {
		t.Fatalf("pods deleted by an equal-priority gang: %v", d)
	}
}

// TestGangPreemptionTwoPreemptors: two high-priority gangs arrive together with room to clear for
// only one (rack 1 runs a high-priority gang): one binds, the other waits, and only rack 0's
// victims are evicted.
func TestGangPreemptionTwoPreemptors(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "ptwo"
	ns := namespace(t, "t-ptwo")
	tr := buildTree(t, test, 2, 4)
	for _, g := range []string{"low0", "low1"} {
		prioGang(t, test, ns, g, 16, 1, lowPriority)
		waitBound(t, ns, g, 16, 60*time.Second)
	}
	prioGang(t, test, ns, "keep", 32, 1, highPriority)
	waitBound(t, ns, "keep", 32, 60*time.Second)

	del := watchDeletions(t, ns)
	prioGang(t, test, ns, "urgent-a", 32, 1, highPriority)
	prioGang(t, test, ns, "urgent-b", 32, 1, highPriority)
	var winner, loser string
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 120*time.Second, true, func(context.Context) (bool, error) {
		a, b := bound(placements(t, ns, "urgent-a")), bound(placements(t, ns, "urgent-b"))
		switch {
		case a == 32:
			winner, loser = "urgent-a", "urgent-b"
		case b == 32:
			winner, loser = "urgent-b", "urgent-a"
		}
		return winner != "", nil
	}); err != nil {
		t.Fatalf("neither preemptor bound: a: %s; b: %s", pendingReasons(t, ns, "urgent-a"), pendingReasons(t, ns, "urgent-b"))
	}
	if r := tr.racksOf(placements(t, ns, winner)); len(r) != 1 || !r[0] {
		t.Fatalf("%s bound in racks %v, want rack 0", winner, r)
	}
	waitPodMessageAny(t, ns, loser, []string{"cannot preempt"}, []string{"no running pod has a priority below"})
	if b := bound(placements(t, ns, loser)); b != 0 {
		t.Fatalf("%s has %d pods bound", loser, b)
	}
	if b := bound(placements(t, ns, "keep")); b != 32 {
		t.Fatalf("the high-priority gang keep lost pods: %d of 32 bound", b)
	}
	deleted := del.settled(t, ns)
	if len(deleted) != 32 {
		var names []string
		for n := range deleted {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Fatalf("%d pods evicted, want 32 (low0 and low1): %v", len(deleted), names)
	}
	for n := range deleted {
		if g := gangOfPod(n); g != "low0" && g != "low1" {
			t.Fatalf("pod %s evicted, want only low0 and low1", n)
		}
	}
}

// TestLonePodPreemptsThroughDefaultPreemption: a pod without a gang still preempts through
// DefaultPreemption (one low-priority lone pod evicted, the pod binds).
func TestLonePodPreemptsThroughDefaultPreemption(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	const test = "plone"
	ns := namespace(t, "t-plone")
	fakeNode(t, test, test+"-n0", nil)
	for i := 0; i < 8; i++ {
		createPods(t, builders.MakeGangPod(ns, fmt.Sprintf("low-%d", i), "", schedulerName).Label("group", "low").
			NodeSelector("hb-test", test).GPUs(1).PriorityClass(lowPriority).Obj())
	}
	waitBound(t, ns, "low", 8, 60*time.Second)
	del := watchDeletions(t, ns)
	createPods(t, builders.MakeGangPod(ns, "high", "", schedulerName).Label("group", "high").
		NodeSelector("hb-test", test).GPUs(1).PriorityClass(highPriority).Obj())
	waitBound(t, ns, "high", 1, 60*time.Second)
	if d := del.snapshot(); len(d) != 1 {
		t.Fatalf("%d pods evicted for one lone pod, want 1 (DefaultPreemption's minimum): %v", len(d), d)
	}
}

func hasDisruptionTarget(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "PreemptionByScheduler" {
			return true
		}
	}
	return false
}

// waitPodEvent waits for an Event with the reason and message fragments on a pod of the gang.
func waitPodEvent(t *testing.T, ns, gangName, reason string, fragments ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing events in %s (will retry): %v", ns, err)
			return false, nil
		}
		for _, e := range l.Items {
			if e.Regarding.Kind == "Pod" && strings.HasPrefix(e.Regarding.Name, gangName+"-") && e.Reason == reason && containsAll(e.Note, fragments) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on a pod of %s with %q", reason, gangName, fragments)
	}
}

// TestGangPreemptionRespectsQueuesAndPolicy: a gang of a non-reclaimable queue is not taken by
// another queue's gang, and a gang whose pods say preemptionPolicy Never does not preempt; both
// wait with their reason and nothing is evicted. A gang of the victim's own queue then may preempt.
func TestGangPreemptionRespectsQueuesAndPolicy(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	ctx := ctxFor(t, 30*time.Second)
	never := builders.PriorityClass("hb-preempt-never", 1000)
	never.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, never, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create PriorityClass: %v", err)
	}
	for _, q := range []*schedulingv1beta1.Queue{builders.MakeQueue("pq-locked").Reclaimable(false).Obj(), builders.MakeQueue("pq-other").Obj()} {
		if err := env.Client.Create(ctx, q); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create Queue %s: %v", q.Name, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), q) })
	}
	const test = "pqueue"
	ns := namespace(t, "t-pqueue")
	buildTree(t, test, 1, 4) // one rack of 32 GPUs
	queuedGang := func(name, queue, class string, n int) {
		pg := builders.MakePodGroup(ns, name).MinMember(int32(n)).Queue(queue).NetworkTopology(hardTier(1)).Obj()
		if err := env.Client.Create(ctx, pg); err != nil {
			t.Fatalf("create PodGroup %s: %v", name, err)
		}
		pods := gangPods(test, ns, name, n)
		for _, p := range pods {
			p.Spec.PriorityClassName = class
		}
		createPods(t, pods...)
	}
	queuedGang("locked", "pq-locked", lowPriority, 32)
	waitBound(t, ns, "locked", 32, 60*time.Second)
	del := watchDeletions(t, ns)

	queuedGang("other", "pq-other", highPriority, 32)
	waitPodMessage(t, ns, "other", "cannot preempt", "gang "+ns+"/locked (queue pq-locked is not reclaimable)")
	queuedGang("polite", "pq-locked", "hb-preempt-never", 32)
	waitPodMessage(t, ns, "polite", "does not preempt", "preemptionPolicy is Never")
	if d := del.snapshot(); len(d) != 0 {
		t.Fatalf("pods evicted although no preemption was allowed: %d", len(d))
	}
	if b := bound(placements(t, ns, "locked")); b != 32 {
		t.Fatalf("gang locked has %d of 32 pods bound", b)
	}
	// The same queue may take it (Volcano's preempt within a queue).
	deletePods(t, ns, "other")
	queuedGang("mate", "pq-locked", highPriority, 32)
	waitBound(t, ns, "mate", 32, 120*time.Second)
	evicted := map[string]int{}
	for name := range del.settled(t, ns) {
		if g := gangOfPod(name); g != "other" { // other's pods were deleted by the test
			evicted[g]++
		}
	}
	if len(evicted) != 1 || evicted["locked"] != 32 {
		t.Fatalf("evicted for the same-queue gang (gang: pods): %v, want the 32 of locked", evicted)
	}
}
