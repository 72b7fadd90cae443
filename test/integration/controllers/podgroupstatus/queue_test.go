package podgroupstatus

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{gpu: *resource.NewQuantity(n, resource.DecimalSI)}
}

// volcanoJob creates a Volcano Job (no Volcano controller runs in this suite: it only owns PodGroups)
// and returns a controller reference to it.
func volcanoJob(t *testing.T, ns, name, schedulerName string) *metav1.OwnerReference {
	t.Helper()
	j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1alpha1.JobSpec{SchedulerName: schedulerName, MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{
			Name: "worker", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1"}}}}}}}}
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), j))
	return metav1.NewControllerRef(j, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))
}

// The plugin's own reason appears as the Unschedulable condition while the gang cannot be placed, and
// is cleared once it is.
func TestUnschedulableConditionFromScheduler(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "unsch")
	rack(t, "unsch", "unsch-rack", 1)
	q := queue(t, "unsch-q", nil, schedulingv1beta1.QueueStateOpen, "")
	podGroup(t, ns, "g", pgOpts{queue: q, minMember: 2, topology: hardTier1()})
	gangPods(t, "unsch", ns, "g", hb, 2, 8) // two 8-GPU pods: the 1-node rack holds one

	pg := waitPG(t, ns, "g", "Unschedulable with the plugin's reason",
		unschedulable(corev1.ConditionTrue, "GangWaiting", "highestTierAllowed=1", "waits"))
	assert.Equal(t, schedulingv1beta1.PodGroupInqueue, pg.Status.Phase)

	fakeNode(t, "unsch", "unsch-rack-n1", "unsch-rack") // the rack grows: the gang fits
	waitBound(t, ns, "g", 2)
	pg = waitPG(t, ns, "g", "Running with Unschedulable cleared", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupRunning && unschedulable(corev1.ConditionFalse, "GangScheduled")(pg)
	})
	assert.Contains(t, condition(pg, schedulingv1beta1.PodGroupUnschedulableType).Message, "2 of minMember 2 pods placed")
}

// A queue's capability holds the younger gang Pending (its pods gated by the scheduler) until the
// older one finishes; then it is enqueued, placed and Running.
func TestQueueCapabilityHoldsGang(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "cap")
	rack(t, "cap", "cap-rack", 2)
	capQ := queue(t, "cap-q", gpus(8), schedulingv1beta1.QueueStateOpen, "")

	podGroup(t, ns, "a", pgOpts{queue: capQ, minMember: 2, minGPU: 8})
	gangPods(t, "cap", ns, "a", hb, 1, 4) // served from its pods: Inqueue, then placed
	waitPG(t, ns, "a", "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))
	gangPodsFrom(t, "cap", ns, "a", hb, 1, 1, 4)
	waitPG(t, ns, "a", "Running", phaseIs(schedulingv1beta1.PodGroupRunning))

	// b is served from its pods: its first pod makes it Pending (over capability) before the rest of
	// the gang exists, so the scheduler holds the gang (PreEnqueue, phase Pending).
	podGroup(t, ns, "b", pgOpts{queue: capQ, minMember: 2, minGPU: 8})
	gangPods(t, "cap", ns, "b", hb, 1, 4)
	pg := waitPG(t, ns, "b", "Pending over capability", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupPending &&
			unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded", "reserve 8", "minResources 8", "total 16 > capability 8")(pg)
	})
	waitEvent(t, ns, "b", "QueueCapabilityExceeded", fmt.Sprintf("queue %q", capQ), "total 16 > capability 8")
	gangPodsFrom(t, "cap", ns, "b", hb, 1, 1, 4)
	// The scheduler has seen b's pods (a third gang created after them is placed) and keeps them
	// unbound while b is Pending.
	podGroup(t, ns, "c", pgOpts{queue: capQ, minMember: 1})
	gangPods(t, "cap", ns, "c", hb, 1, 0)
	waitBound(t, ns, "c", 1)
	for _, p := range groupPods(t, ns, "b") {
		assert.Empty(t, p.Spec.NodeName, "pod %s of the Pending gang is bound", p.Name)
	}
	assert.Equal(t, schedulingv1beta1.PodGroupPending, pg.Status.Phase)

	setPodsPhase(t, ns, "a", corev1.PodSucceeded)
	waitPG(t, ns, "a", "Completed", phaseIs(schedulingv1beta1.PodGroupCompleted))
	waitBound(t, ns, "b", 2)
	waitPG(t, ns, "b", "Running with Unschedulable cleared", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupRunning && unschedulable(corev1.ConditionFalse, "GangScheduled")(pg)
	})
	waitEvent(t, ns, "b", "Enqueued", fmt.Sprintf("admitted to queue %q", capQ), "nvidia.com/gpu 8 of 8")
}

// A gang whose pods all exist before the controller has judged its PodGroup (no phase yet: a JobSet's
// or a hand-made PodGroup) is held by the scheduler until it is enqueued, so a full queue holds it:
// its pods are never placed while the older gang uses the queue's capability.
func TestGangWithoutPhaseWaitsForEnqueue(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "nophase")
	rack(t, "nophase", "nophase-rack", 2)
	capQ := queue(t, "nophase-q", gpus(8), schedulingv1beta1.QueueStateOpen, "")

	podGroup(t, ns, "a", pgOpts{queue: capQ, minMember: 2, minGPU: 8})
	gangPods(t, "nophase", ns, "a", hb, 2, 4)
	waitPG(t, ns, "a", "Running", phaseIs(schedulingv1beta1.PodGroupRunning))

	// b: the PodGroup and its whole gang at once, with no wait for the controller in between.
	podGroup(t, ns, "b", pgOpts{queue: capQ, minMember: 2, minGPU: 8})
	gangPods(t, "nophase", ns, "b", hb, 2, 4)
	waitPG(t, ns, "b", "Pending over capability", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupPending &&
			unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded", "total 16 > capability 8")(pg)
	})
	// The scheduler has seen b's pods: a gang created after them is placed.
	podGroup(t, ns, "c", pgOpts{queue: capQ, minMember: 1})
	gangPods(t, "nophase", ns, "c", hb, 1, 0)
	waitBound(t, ns, "c", 1)
	for _, p := range groupPods(t, ns, "b") {
		assert.Empty(t, p.Spec.NodeName, "pod %s of the gang over capability is bound", p.Name)
	}

	setPodsPhase(t, ns, "a", corev1.PodSucceeded)
	waitBound(t, ns, "b", 2)
	waitPG(t, ns, "b", "Running", phaseIs(schedulingv1beta1.PodGroupRunning))
	waitEvent(t, ns, "b", "Enqueued", fmt.Sprintf("admitted to queue %q", capQ))
}

// Waiting gangs are enqueued in the plugin's QueueSort order (priority, then age): when capacity
// frees up, a younger high-priority gang goes first; in a fifo queue nothing passes the head.
func TestQueueOrder(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "order")
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "order-high"}, Value: 1000}
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), pc))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pc) })
	owner := volcanoJob(t, ns, "owner", hb) // served through the owning Job: no pods needed

	orderQ := queue(t, "order-q", gpus(8), schedulingv1beta1.QueueStateOpen, "")
	podGroup(t, ns, "hold", pgOpts{queue: orderQ, minMember: 1, minGPU: 8, owner: owner})
	waitPG(t, ns, "hold", "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))
	podGroup(t, ns, "old-low", pgOpts{queue: orderQ, minMember: 1, minGPU: 8, owner: owner})
	waitPG(t, ns, "old-low", "Pending", phaseIs(schedulingv1beta1.PodGroupPending))
	young := podGroupWithPriority(t, ns, "young-high", orderQ, "order-high", 4, owner)
	waitPG(t, ns, young, "Pending", phaseIs(schedulingv1beta1.PodGroupPending))

	require.NoError(t, env.Client.Delete(ctxFor(t, 30*time.Second), &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hold"}}))
	waitPG(t, ns, young, "Inqueue first (higher priority)", phaseIs(schedulingv1beta1.PodGroupInqueue))
	waitPG(t, ns, "old-low", "still Pending behind it", unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded", "reserve 4", "total 12 > capability 8"))

	t.Run("fifo", func(t *testing.T) {
		// The head does not fit, so a younger gang that would fit waits too.
		fifoQ := queue(t, "fifo-q", gpus(8), schedulingv1beta1.QueueStateOpen, schedulingv1beta1.DequeueStrategyFIFO)
		var q schedulingv1beta1.Queue
		require.NoError(t, env.Client.Get(ctxFor(t, 10*time.Second), client.ObjectKey{Name: fifoQ}, &q))
		if q.Spec.DequeueStrategy != schedulingv1beta1.DequeueStrategyFIFO {
			t.Skip("the installed Queue CRD prunes spec.dequeueStrategy (volcano.sh/volcano v1.14.0-alpha.0's CRD predates it)")
		}
		podGroup(t, ns, "fifo-a-big", pgOpts{queue: fifoQ, minMember: 1, minGPU: 12, owner: owner})
		waitPG(t, ns, "fifo-a-big", "Pending", unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded", "total 12 > capability 8"))
		podGroup(t, ns, "fifo-b-small", pgOpts{queue: fifoQ, minMember: 1, minGPU: 4, owner: owner})
		waitPG(t, ns, "fifo-b-small", "Pending behind the head", unschedulable(corev1.ConditionTrue, "QueueFIFOOrder", "fifo-a-big"))
	})
}

func podGroupWithPriority(t *testing.T, ns, name, queueName, priorityClass string, minGPU int64, owner *metav1.OwnerReference) string {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1, Queue: queueName, PriorityClassName: priorityClass, MinResources: ptr.To(gpus(minGPU))}}
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), pg))
	return name
}

// A missing queue and a closed queue keep the gang Pending with a condition and an Event; creating
// or opening the queue enqueues it.
func TestMissingAndClosedQueue(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "closed")
	owner := volcanoJob(t, ns, "owner", hb)

	missingQ := queueName("closed-missing-q")
	podGroup(t, ns, "m", pgOpts{queue: missingQ, minMember: 1, owner: owner})
	waitPG(t, ns, "m", "Pending, queue not found", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupPending && unschedulable(corev1.ConditionTrue, "QueueNotFound", strconv.Quote(missingQ), "does not exist")(pg)
	})
	waitEvent(t, ns, "m", "QueueNotFound", strconv.Quote(missingQ))
	createQueue(t, missingQ, nil, schedulingv1beta1.QueueStateOpen, "")
	pg := waitPG(t, ns, "m", "Inqueue once the queue exists", phaseIs(schedulingv1beta1.PodGroupInqueue))
	assert.True(t, unschedulable(corev1.ConditionFalse, "Enqueued")(pg), "refusal cleared: %+v", pg.Status.Conditions)

	closedQ := queue(t, "closed-q", nil, schedulingv1beta1.QueueStateClosed, "")
	// The Queue is created Open (empty state) and then closed; Queues and PodGroups reach the
	// controller through separate watches, so the gang is created once the controller has seen the
	// close (a gang created in between is enqueued, as by Volcano's scheduler; docs/scheduler.md).
	waitCachedQueueState(t, closedQ, schedulingv1beta1.QueueStateClosed)
	podGroup(t, ns, "c", pgOpts{queue: closedQ, minMember: 1, owner: owner})
	waitPG(t, ns, "c", "Pending, queue closed", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1beta1.PodGroupPending && unschedulable(corev1.ConditionTrue, "QueueClosed", strconv.Quote(closedQ)+" is Closed")(pg)
	})
	waitEvent(t, ns, "c", "QueueClosed", strconv.Quote(closedQ)+" is Closed")
	setQueueState(t, closedQ, schedulingv1beta1.QueueStateOpen)
	waitPG(t, ns, "c", "Inqueue once the queue is Open", phaseIs(schedulingv1beta1.PodGroupInqueue))
}

// PodGroups of Volcano's scheduler (by their pods, or by their owning Job) are never written.
func TestOtherSchedulersUntouched(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "other")
	rack(t, "other", "other-rack", 1)
	otherQ := queue(t, "other-q", nil, schedulingv1beta1.QueueStateOpen, "")
	before := counterValue(t, "hyperbatch_podgroupstatus_not_served_total")

	byPods := podGroup(t, ns, "vc-pods", pgOpts{queue: otherQ, minMember: 2})
	gangPods(t, "other", ns, "vc-pods", "volcano", 2, 1)
	vcJob := volcanoJob(t, ns, "vc-job", "volcano")
	byJob := podGroup(t, ns, "vc-job-pg", pgOpts{queue: otherQ, minMember: 1, owner: vcJob})
	// Pods of hyperbatch-scheduler do not make a PodGroup whose owning Job names Volcano ours.
	gangPods(t, "other", ns, "vc-job-pg", hb, 1, 1)
	// A PodGroup of hyperbatch-scheduler beside them is served.
	hbJob := volcanoJob(t, ns, "hb-job", hb)
	podGroup(t, ns, "hb-job-pg", pgOpts{queue: otherQ, minMember: 1, owner: hbJob})
	waitPG(t, ns, "hb-job-pg", "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))

	// Positive signal: the controller has reconciled (and skipped) the other scheduler's PodGroups
	// after their pods existed (2 creates + pod events).
	waitFor(t, 30*time.Second, "not-served reconciles", func(context.Context) (bool, error) {
		return counterValue(t, "hyperbatch_podgroupstatus_not_served_total")-before >= 4, nil
	})
	for _, want := range []*schedulingv1beta1.PodGroup{byPods, byJob} {
		got, err := getPG(ctxFor(t, 10*time.Second), ns, want.Name)
		require.NoError(t, err)
		assert.Equal(t, want.ResourceVersion, got.ResourceVersion, "PodGroup %s was written", want.Name)
		assert.Empty(t, got.Status.Phase, "PodGroup %s", want.Name)
		assert.Zero(t, ctl.writes.For(want.Name), "writes to PodGroup %s", want.Name)
	}
}

// counterValue sums a metric's samples in controller-runtime's registry, restricted to samples whose
// labels include every given name=value pair.
func counterValue(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	sample:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue sample
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
