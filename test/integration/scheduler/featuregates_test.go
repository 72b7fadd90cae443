package scheduler

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"
)

// hyperbatch-scheduler runs with NominatedNodeNameForExpectation off (localproc.SchedulerFeatureGates,
// the chart's scheduler.featureGates): the members of a gang that wait at Permit are not patched
// with status.nominatedNodeName, so a gang costs one apiserver write per pod (the binding), as in
// 1.34. The test first sees the gang bound and its members counted by kube-scheduler's Permit wait
// metric (the path under test ran), then checks every pod update it watched.
func TestGangMembersWaitAtPermitWithoutNominatedNodeName(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "nnn"
	ns := namespace(t, "t-nnn")
	buildTree(t, test, 2, 2)
	waitsBefore := permitWaits(t)

	ctx := ctxFor(t, 90*time.Second)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const size = 4
	podGroup(t, ns, "g", size, hardTier(1))
	createPods(t, gangPods(test, ns, "g", size)...)

	boundPods, nominated := map[string]bool{}, map[string]string{}
	for len(boundPods) < size {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("pod watch closed with %d of %d pods bound", len(boundPods), size)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			if p.Status.NominatedNodeName != "" {
				nominated[p.Name] = p.Status.NominatedNodeName
			}
			if p.Spec.NodeName != "" {
				boundPods[p.Name] = true
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d pods bound; pending reasons: %s", len(boundPods), size, pendingReasons(t, ns, "g"))
		}
	}
	// All but the member completing the quorum waited at Permit.
	if got := permitWaits(t) - waitsBefore; got < size-1 {
		t.Fatalf("kube-scheduler counted %d Permit waits for the gang of %d, want at least %d", got, size, size-1)
	}
	if len(nominated) > 0 {
		t.Errorf("gang members were patched with status.nominatedNodeName while waiting at Permit: %v", nominated)
	}
}

// permitWaits is the number of Permit waits kube-scheduler (in this process) has finished, any result.
func permitWaits(t *testing.T) uint64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "scheduler_permit_wait_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}
