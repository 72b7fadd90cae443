package scheduler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func ctxFor(t *testing.T, d time.Duration) context.Context { return framework.TestContext(t, d) }

// dumpLogOnFailure prints the end of the suite's log when the test failed.
func dumpLogOnFailure(t *testing.T) { framework.DumpLogOnFailure(t, logPath) }

// namespace creates a fresh namespace for the test; its pods are force-deleted at the end.
func namespace(t *testing.T, prefix string) string {
	return framework.SequencedNamespace(t, cs, prefix)
}

// fakeNode creates a Ready node with 8 GPUs, 64 CPUs and 256Gi, labelled hb-test=<test> plus labels.
func fakeNode(t *testing.T, test, name string, labels map[string]string) {
	t.Helper()
	framework.CreateReadyNode(t, cs, builders.MakeNode(name).Label("hb-test", test).Labels(labels).Obj(), builders.GPUNode())
}

var (
	nodeMember  = builders.NodeMember
	regexMember = builders.RegexMember
	labelMember = builders.LabelMember
	hyperMember = builders.HyperNodeMember
	hardTier    = builders.HardTier
	gpu         = builders.GPU
)

func hyperNode(t *testing.T, name string, tier int, tierName string, members ...topologyv1alpha1.MemberSpec) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	hn := builders.MakeHyperNode(name, tier).TierName(tierName).Members(members...).Obj()
	if err := env.Client.Create(ctx, hn); err != nil {
		t.Fatalf("create HyperNode %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.IgnoreNotFound(env.Client.Delete(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	})
}

func deleteHyperNode(t *testing.T, name string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	if err := env.Client.Delete(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("delete HyperNode %s: %v", name, err)
	}
}

// tree is a 3-tier test topology: racks (tier 1, tierName "rack") of nodesPerRack nodes, spines
// (tier 2, "spine") of two racks, one top (tier 3, "zone") over every spine. Rack 0 selects its
// nodes by label, rack 1 by regex, the others by exact name.
type tree struct {
	test   string
	racks  [][]string // node names per rack
	rackOf map[string]int
}

func (tr tree) rack(i int) string  { return fmt.Sprintf("%s-rack-%d", tr.test, i) }
func (tr tree) spine(i int) string { return fmt.Sprintf("%s-spine-%d", tr.test, i) }
func (tr tree) top() string        { return tr.test + "-top" }

func buildTree(t *testing.T, test string, racks, nodesPerRack int) tree {
	t.Helper()
	return buildTreeOf(t, test, racks, nodesPerRack, fakeNode)
}

// buildTreeOf is buildTree with the nodes made by mkNode (fakeNode, kwokNode).
func buildTreeOf(t *testing.T, test string, racks, nodesPerRack int, mkNode func(t *testing.T, test, name string, labels map[string]string)) tree {
	t.Helper()
	tr := tree{test: test, rackOf: map[string]int{}}
	for r := 0; r < racks; r++ {
		var names []string
		for i := 0; i < nodesPerRack; i++ {
			n := fmt.Sprintf("%s-r%d-n%d", test, r, i)
			mkNode(t, test, n, map[string]string{"hb-rack": tr.rack(r)})
			names = append(names, n)
			tr.rackOf[n] = r
		}
		tr.racks = append(tr.racks, names)
		var members []topologyv1alpha1.MemberSpec
		switch r {
		case 0:
			members = []topologyv1alpha1.MemberSpec{labelMember("hb-rack", tr.rack(r))}
		case 1:
			members = []topologyv1alpha1.MemberSpec{regexMember(fmt.Sprintf("^%s-r1-n[0-9]+$", test))}
		default:
			for _, n := range names {
				members = append(members, nodeMember(n))
			}
		}
		hyperNode(t, tr.rack(r), 1, "rack", members...)
	}
	var spines []topologyv1alpha1.MemberSpec
	for s := 0; s*2 < racks; s++ {
		members := []topologyv1alpha1.MemberSpec{hyperMember(tr.rack(2 * s))}
		if 2*s+1 < racks {
			members = append(members, hyperMember(tr.rack(2*s+1)))
		}
		hyperNode(t, tr.spine(s), 2, "spine", members...)
		spines = append(spines, hyperMember(tr.spine(s)))
	}
	hyperNode(t, tr.top(), 3, "zone", spines...)
	return tr
}

func podGroup(t *testing.T, ns, name string, minMember int32, nt *schedulingv1beta1.NetworkTopologySpec) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	pg := builders.MakePodGroup(ns, name).MinMember(minMember).NetworkTopology(nt).Obj()
	if err := env.Client.Create(ctx, pg); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
}

// gangPod returns a pod of group asking for one GPU, restricted to the test's nodes.
func gangPod(test, ns, group, name string) *corev1.Pod {
	return builders.MakeGangPod(ns, name, group, schedulerName).Label("group", group).NodeSelector("hb-test", test).GPUs(1).Obj()
}

func createPods(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
}

func gangPods(test, ns, group string, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = gangPod(test, ns, group, fmt.Sprintf("%s-%03d", group, i))
	}
	return out
}

// placements returns pod name → node for the group's pods (node "" when unbound).
func placements(t *testing.T, ns, group string) map[string]string {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "group=" + group})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := map[string]string{}
	for _, p := range l.Items {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

func bound(m map[string]string) int {
	n := 0
	for _, v := range m {
		if v != "" {
			n++
		}
	}
	return n
}

// waitBound waits until n of the group's pods are bound and returns their placements.
func waitBound(t *testing.T, ns, group string, n int, timeout time.Duration) map[string]string {
	t.Helper()
	var last map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = placements(t, ns, group)
		return bound(last) >= n, nil
	})
	if err != nil {
		t.Fatalf("gang %s: %d of %d pods bound after %v; pending reasons: %s", group, bound(last), n, timeout, pendingReasons(t, ns, group))
	}
	return last
}

// pendingReasons summarizes the PodScheduled=False messages of the group's unbound pods.
func pendingReasons(t *testing.T, ns, group string) string {
	ctx := ctxFor(t, 30*time.Second)
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "group=" + group})
	if err != nil {
		return err.Error()
	}
	seen := map[string]int{}
	for _, p := range l.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		msg := "(no condition)"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				msg = c.Message
			}
		}
		seen[msg]++
	}
	var parts []string
	for m, c := range seen {
		parts = append(parts, fmt.Sprintf("%d× %q", c, m))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// stayUnbound checks that none of the group's pods gets bound for d.
func stayUnbound(t *testing.T, ns, group string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b := bound(placements(t, ns, group)); b != 0 {
			t.Fatalf("gang %s: %d pods bound, want none", group, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitPodMessage waits until one of the group's pods reports a PodScheduled=False message with all
// the fragments.
func waitPodMessage(t *testing.T, ns, group string, fragments ...string) {
	t.Helper()
	waitPodMessageAny(t, ns, group, fragments)
}

// waitPodMessageAny waits until a pod of the group is unschedulable with a message that contains
// every fragment of one of the alternatives.
func waitPodMessageAny(t *testing.T, ns, group string, alternatives ...[]string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "group=" + group})
		if err != nil {
			t.Logf("listing pods of %s (will retry): %v", group, err)
			return false, nil
		}
		for _, p := range l.Items {
			for _, c := range p.Status.Conditions {
				if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
					continue
				}
				for _, fragments := range alternatives {
					if containsAll(c.Message, fragments) {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no pod of %s reports any of %q; pending reasons: %s", group, alternatives, pendingReasons(t, ns, group))
	}
}

// waitEvent waits for an Event on the PodGroup with the reason and message fragments.
func waitEvent(t *testing.T, ns, pg, reason string, fragments ...string) {
	t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("listing events in %s (will retry): %v", ns, err)
			return false, nil
		}
		notes = notes[:0]
		for _, e := range l.Items {
			if e.Regarding.Kind != "PodGroup" || e.Regarding.Name != pg {
				continue
			}
			notes = append(notes, e.Reason+": "+e.Note)
			if e.Reason == reason && containsAll(e.Note, fragments) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on PodGroup %s with %q; events: %q", reason, pg, fragments, notes)
	}
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

func deletePods(t *testing.T, ns, group string) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "group=" + group}); err != nil {
		t.Fatalf("delete pods: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(placements(t, ns, group)) == 0, nil
	}); err != nil {
		t.Fatalf("pods of %s not gone: %v", group, err)
	}
}

// waitingPods returns pod name → node of the group's pods waiting at Permit.
func waitingPods(ns, group string) map[string]string {
	out := map[string]string{}
	profile.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		p := wp.GetPod()
		if p.Namespace == ns && p.Annotations["scheduling.k8s.io/group-name"] == group {
			out[p.Name] = p.Spec.NodeName
		}
	})
	return out
}

// racksOf returns the set of rack indexes the placements use.
func (tr tree) racksOf(m map[string]string) map[int]bool {
	out := map[int]bool{}
	for _, n := range m {
		if n != "" {
			out[tr.rackOf[n]] = true
		}
	}
	return out
}

var deleteNow = metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
