package hypertopology

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

var _ fwk.PreEnqueuePlugin = &Plugin{}

// held reports whether a PodGroup in phase keeps its gang out of scheduling: Pending always; no
// phase yet while waitForEnqueue is on (a lifecycle controller will decide it).
func (p *Plugin) held(phase schedulingv1beta1.PodGroupPhase) bool {
	return phase == schedulingv1beta1.PodGroupPending || phase == "" && p.waitForEnqueue
}

// PreEnqueue keeps a gang pod out of the active queue while fewer than minMember pods of its gang
// exist, so an incomplete gang's pods are not popped, rejected in PreFilter and backed off one by
// one. Counting uses the pod informer's gang index (O(gang)).
//
// Gated pods sit in the scheduler's unschedulable pods with this plugin as their gating plugin;
// kube-scheduler re-runs PreEnqueue when a pod is activated (fwk.Handle.Activate) or when one
// of the plugin's registered events with a Queue hint concerns it. Unscheduled-pod additions are not
// such an event in kube-scheduler 1.34, so the wake-up is the plugin's own: onPod activates the
// gang's pending pods when the member completing the quorum is added, and onPodGroup does when the
// PodGroup appears or its spec (minMember) changes; the PodGroup Add/Update event (hintPodGroup)
// requeues them as well.
//
// A gang is also held while its PodGroup is not enqueued (held: phase Pending, or no phase yet unless
// waitForEnqueue is false).
//
// Pods whose PodGroup does not exist yet are not gated: PreFilter turns them away and the PodGroup's
// Add event requeues them.
func (p *Plugin) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return nil
	}
	pg, err := p.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil // no PodGroup (or lister error): let PreFilter decide
	}
	if p.held(pg.Status.Phase) {
		// Not admitted to its queue (queue missing, closed or full), or not judged yet (no phase):
		// the PodGroup's Unschedulable condition and Events (controllers/podgroupstatus) say why.
		// Leaving the held phase re-activates the gang (onPodGroup, hintPodGroup).
		phase := string(pg.Status.Phase)
		if phase == "" {
			phase = "none yet"
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("gang %s waits for its PodGroup to be enqueued (phase %s, queue %q)", key, phase, pg.Spec.Queue))
	}
	minMember := max(pg.Spec.MinMember, 1)
	n := int32(len(p.members(key)))
	if n >= minMember {
		return nil
	}
	spec := gang.SpecOf(pg, pod)
	// The Event omits the count so that it is recorded once, not once per arriving pod.
	p.events.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting,
		fmt.Sprintf("gang %s has fewer than its minMember %d pods; waiting for the rest", key, spec.MinMember))
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("gang %s has %d of its minMember %d pods; waiting for the rest", key, n, spec.MinMember))
}
