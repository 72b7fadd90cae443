package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// kwokNode is fakeNode run by the test's kwok: made Ready with its capacity first (so kwok's node
// initialisation leaves the capacity alone), then annotated for kwok, which then runs its pods
// (Running and Ready, as a kubelet reports them) and keeps the node Ready.
func kwokNode(t *testing.T, test, name string, labels map[string]string) {
	t.Helper()
	fakeNode(t, test, name, labels)
	ctx := ctxFor(t, 30*time.Second)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, framework.KwokNodeAnnotation, framework.KwokNodeValue))
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate node %s for kwok: %v", name, err)
	}
}

// startKwokAndDisruptionController starts kwok and kube-controller-manager's disruption controller
// (it fills PodDisruptionBudget status) for one test.
func startKwokAndDisruptionController(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kwok, err := framework.StartKwok(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: dir})
	if err != nil {
		t.Fatalf("start kwok: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(kwok.LogTail(30))
		}
		if err := kwok.Stop(); err != nil {
			t.Log(err)
		}
	})
	kcm, err := framework.StartKubeControllerManager(env, "disruption-controller")
	if err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(kcm.LogTail(4000))
		}
		kcm.Stop()
	})
}

// preemptingNotes are the notes of the GangPreempting Events on the PodGroup.
func preemptingNotes(t *testing.T, ns, pg string) []string {
	t.Helper()
	l, err := cs.EventsV1().Events(ns).List(ctxFor(t, 30*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range l.Items {
		if e.Regarding.Kind == "PodGroup" && e.Regarding.Name == pg && e.Reason == "GangPreempting" {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestGangPreemptionRespectsPDBs: two racks of kwok nodes (16 GPUs each), full of low-priority gangs
// kwok runs. Rack 0 holds gangs a and b (8 pods each) under one PodDisruptionBudget, minAvailable 8,
// which the real disruption controller turns into 8 allowed disruptions: each gang alone fits the
// budget, both together break it by 8 pods. Rack 1 holds gangs c (8), d (4) and e (4), under no
// budget. A high-priority gang of 16 limited to tier 1:
//   - clears rack 1 (three victims, no violation) rather than rack 0 (two victims, but 8 violations
//     of the shared budget), and its Event reports no violation;
//   - a second one, with rack 1 now running high-priority work, has no other way: it clears rack 0
//     and its Event reports the 8 violations (16 if the budget's status were not read).
func TestGangPreemptionRespectsPDBs(t *testing.T) {
	dumpLogOnFailure(t)
	priorityClasses(t)
	startKwokAndDisruptionController(t)
	const test = "ppdb"
	ns := namespace(t, "t-ppdb")
	tr := buildTreeOf(t, test, 2, 2, kwokNode)
	gangs := map[string]int{"a": 8, "b": 8, "c": 8, "d": 4, "e": 4}
	for _, g := range []string{"a", "b", "c", "d", "e"} {
		n, rack := gangs[g], 1
		if g == "a" || g == "b" {
			rack = 0
		}
		podGroup(t, ns, g, int32(n), hardTier(1))
		pods := gangPods(test, ns, g, n)
		for _, p := range pods {
			p.Spec.PriorityClassName = lowPriority
			p.Spec.NodeSelector["hb-rack"] = tr.rack(rack)
			if rack == 0 {
				p.Labels["app"] = "shared"
			}
		}
		createPods(t, pods...)
		waitBound(t, ns, g, n, 60*time.Second)
	}
	ctx := ctxFor(t, 90*time.Second)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrIntStr(8), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shared"}}}}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
	// The disruption controller counts the 16 pods kwok runs as healthy and allows 8 disruptions.
	var last policyv1.PodDisruptionBudgetStatus
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // a failed read is retried until ctx ends; the failure shows the last status
		}
		last = got.Status
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 16 && got.Status.DisruptionsAllowed == 8, nil
	}); err != nil {
		t.Fatalf("PodDisruptionBudget status never reached 16 healthy / 8 allowed: %+v", last)
	}

	del := watchDeletions(t, ns)
	prioGang(t, test, ns, "urgent1", 16, 1, highPriority)
	if r := tr.racksOf(waitBound(t, ns, "urgent1", 16, 120*time.Second)); len(r) != 1 || !r[1] {
		t.Fatalf("urgent1 bound in racks %v, want rack 1 (no budget) over rack 0 (fewer victims, shared budget broken)", r)
	}
	waitEvent(t, ns, "urgent1", "GangPreempting", "to clear HyperNode "+tr.rack(1)+" (tier 1)")
	for _, note := range preemptingNotes(t, ns, "urgent1") {
		if strings.Contains(note, "PodDisruptionBudget") {
			t.Fatalf("urgent1's preemption reports a budget violation: %q", note)
		}
	}
	if v := victimGangs(t, del, ns); strings.Join(v, ",") != "c,d,e" {
		t.Fatalf("urgent1's victims %v, want c,d,e", v)
	}

	prioGang(t, test, ns, "urgent2", 16, 1, highPriority)
	if r := tr.racksOf(waitBound(t, ns, "urgent2", 16, 120*time.Second)); len(r) != 1 || !r[0] {
		t.Fatalf("urgent2 bound in racks %v, want rack 0 (the only one left)", r)
	}
	waitEvent(t, ns, "urgent2", "GangPreempting", "to clear HyperNode "+tr.rack(0)+" (tier 1)", "(8 of the pods violate a PodDisruptionBudget")
	if v := victimGangs(t, del, ns); strings.Join(v, ",") != "a,b,c,d,e" {
		t.Fatalf("victims after urgent2 %v, want a,b,c,d,e", v)
	}
}

// victimGangs waits until the evicted gangs are gone whole and returns their names, sorted.
func victimGangs(t *testing.T, del *deletions, ns string) []string {
	t.Helper()
	seen := map[string]bool{}
	for name := range del.settled(t, ns) {
		seen[gangOfPod(name)] = true
	}
	var out []string
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func ptrIntStr(v int) *intstr.IntOrString {
	x := intstr.FromInt32(int32(v))
	return &x
}
