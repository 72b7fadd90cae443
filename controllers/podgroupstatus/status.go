package podgroupstatus

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// Condition reasons this controller writes.
const (
	// ReasonGangWaiting is the scheduler plugin's reason for a gang it cannot place yet (shared in
	// gangcontract); the message is the plugin's, read from the member pods' PodScheduled=False
	// condition.
	ReasonGangWaiting = gangcontract.ReasonGangWaiting
	// ReasonGangScheduled: minMember pods are bound.
	ReasonGangScheduled = gangcontract.ReasonGangScheduled
	// ReasonQueueNotFound, ReasonQueueClosed, ReasonQueueCapabilityExceeded, ReasonQueueFIFO: the gang
	// stays Pending (enqueue refused).
	ReasonQueueNotFound           = "QueueNotFound"
	ReasonQueueClosed             = "QueueClosed"
	ReasonQueueCapabilityExceeded = "QueueCapabilityExceeded"
	ReasonQueueFIFO               = "QueueFIFOOrder"
	// ReasonEnqueued: Event when the gang is admitted (Pending → Inqueue).
	ReasonEnqueued = "Enqueued"
)

// podCounts is what the member pods say about the gang.
type podCounts struct {
	Running, Succeeded, Failed int32
	// Allocated counts bound pods that have not failed (pending on a node, running, succeeded):
	// Volcano's "allocated" tasks (AllocatedStatus or Succeeded).
	Allocated int32
	// Active counts pods that have not finished (bound or not).
	Active int32
	// Waiting is the newest PodScheduled=False message among unbound active pods (the scheduler
	// plugin's reason why the gang waits); empty when none.
	Waiting   string
	waitingAt time.Time
}

func countPods(pods []*corev1.Pod) podCounts {
	var c podCounts
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			c.Succeeded++
			c.Allocated++
			continue
		case corev1.PodFailed:
			c.Failed++
			continue
		case corev1.PodRunning:
			c.Running++
		}
		c.Active++
		if p.Spec.NodeName != "" {
			c.Allocated++
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message != "" {
				if c.Waiting == "" || cond.LastTransitionTime.After(c.waitingAt) {
					c.Waiting, c.waitingAt = cond.Message, cond.LastTransitionTime.Time
				}
			}
		}
	}
	return c
}

// jobFinished says whether a Volcano Job has reached a final state.
func jobFinished(job *batchv1alpha1.Job) bool {
	if job == nil {
		return false
	}
	switch job.Status.State.Phase {
	case batchv1alpha1.Completed, batchv1alpha1.Failed, batchv1alpha1.Terminated, batchv1alpha1.Aborted:
		return true
	}
	return false
}

// nextPhase is the phase the pods and the owning Job give the gang, or needsAdmission when only
// enqueue can decide (the gang is not placed and not Inqueue yet). A Completed gang stays Completed.
//   - Running once minMember pods are allocated (bound and not failed, or succeeded), as Volcano;
//   - Completed when every allocated pod has succeeded (Volcano's rule), when the owning Job has
//     finished, or, for a gang without an owning Job, when no member is active and at least minMember
//     have finished (so a failed standalone gang does not hold its queue reservation forever);
//   - a Running gang that loses pods below minMember goes back through enqueue, as Volcano sets it
//     Pending (Volcano's job controller recreates pods only after it is Inqueue again).
func nextPhase(cur schedulingv1beta1.PodGroupPhase, c podCounts, minMember int32, ownedByJob bool, job *batchv1alpha1.Job) (phase schedulingv1beta1.PodGroupPhase, needsAdmission bool) {
	if cur == schedulingv1beta1.PodGroupCompleted || jobFinished(job) {
		return schedulingv1beta1.PodGroupCompleted, false
	}
	minMember = max(minMember, 1)
	if c.Allocated >= minMember {
		if c.Succeeded == c.Allocated {
			return schedulingv1beta1.PodGroupCompleted, false
		}
		return schedulingv1beta1.PodGroupRunning, false
	}
	if !ownedByJob && c.Active == 0 && c.Succeeded+c.Failed >= minMember {
		return schedulingv1beta1.PodGroupCompleted, false
	}
	if cur == schedulingv1beta1.PodGroupInqueue {
		return cur, false
	}
	return "", true
}

// desiredStatus builds the status to store from the current one, keeping condition transition times
// when a condition's status does not change (so an unchanged gang yields an identical status).
// verdict is the enqueue decision when there was one (nil otherwise).
func desiredStatus(cur schedulingv1beta1.PodGroupStatus, phase schedulingv1beta1.PodGroupPhase, c podCounts, minMember int32, v *verdict, now time.Time) schedulingv1beta1.PodGroupStatus {
	s := *cur.DeepCopy()
	s.Phase = phase
	s.Running, s.Succeeded, s.Failed = c.Running, c.Succeeded, c.Failed
	minMember = max(minMember, 1)
	switch {
	case phase == schedulingv1beta1.PodGroupRunning || phase == schedulingv1beta1.PodGroupCompleted:
		msg := fmt.Sprintf("%d of minMember %d pods placed", c.Allocated, minMember)
		// A gang that never waited gets no Unschedulable condition; one that did gets it cleared.
		if u := findCondition(s.Conditions, schedulingv1beta1.PodGroupUnschedulableType); u != nil && (u.Status == corev1.ConditionTrue || u.Reason != ReasonGangScheduled) {
			setCondition(&s.Conditions, schedulingv1beta1.PodGroupUnschedulableType, corev1.ConditionFalse, ReasonGangScheduled, msg, now)
		}
		if c.Allocated >= minMember && findCondition(s.Conditions, schedulingv1beta1.PodGroupScheduled) == nil {
			setCondition(&s.Conditions, schedulingv1beta1.PodGroupScheduled, corev1.ConditionTrue, ReasonGangScheduled, msg, now)
		}
	case v != nil && !v.admit:
		setCondition(&s.Conditions, schedulingv1beta1.PodGroupUnschedulableType, corev1.ConditionTrue, v.reason, v.message, now)
	case c.Waiting != "":
		setCondition(&s.Conditions, schedulingv1beta1.PodGroupUnschedulableType, corev1.ConditionTrue, ReasonGangWaiting, c.Waiting, now)
	default:
		// Inqueue, nothing waiting at the scheduler (yet): an enqueue refusal no longer applies.
		if cond := findCondition(s.Conditions, schedulingv1beta1.PodGroupUnschedulableType); cond != nil && cond.Status == corev1.ConditionTrue && cond.Reason != ReasonGangWaiting {
			setCondition(&s.Conditions, schedulingv1beta1.PodGroupUnschedulableType, corev1.ConditionFalse, ReasonEnqueued, "admitted to its queue", now)
		}
	}
	return s
}

func findCondition(conds []schedulingv1beta1.PodGroupCondition, t schedulingv1beta1.PodGroupConditionType) *schedulingv1beta1.PodGroupCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition sets one condition of each type; the transition time moves only when the status does.
func setCondition(conds *[]schedulingv1beta1.PodGroupCondition, t schedulingv1beta1.PodGroupConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) {
	if c := findCondition(*conds, t); c != nil {
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	*conds = append(*conds, schedulingv1beta1.PodGroupCondition{Type: t, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
}
