package hypertopology

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// Reserve records the gang pod's node.
func (p *Plugin) Reserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	if key, ok := gang.KeyOf(pod); ok {
		p.res.Assume(key, pod, nodeName)
	}
	return nil
}

// Unreserve forgets the pod's reservation and releases the rest of its gang: a gang whose member
// failed (Permit timeout, rejection, binding error) must not keep the others' resources.
func (p *Plugin) Unreserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return
	}
	// Under the gang lock, so that a concurrent Permit counts either all of these reservations or
	// none of them.
	unlock := p.res.lockGang(key)
	p.res.Forget(key, pod.UID)
	p.res.noteReleased(pod.UID)
	n := p.rejectWaitingLocked(key, pod.UID, fmt.Sprintf("gang %s released: member %s/%s was unreserved", key, pod.Namespace, pod.Name))
	unlock()
	if n > 0 {
		klog.FromContext(ctx).V(3).Info("Released gang", "gang", key, "pod", klog.KObj(pod), "released", n)
		if st := readState(cs); st != nil && st.spec != nil {
			p.events.gang(st.spec, pod, corev1.EventTypeWarning, ReasonGangReleased,
				fmt.Sprintf("released %d reserved pod(s): member %s was unreserved (Permit timeout or rejection)", n, pod.Name))
		}
	}
	if len(p.res.Assumed(key)) == 0 {
		p.dropPlan(key)
	}
}

// Permit lets the gang's pods bind together: it waits until minMember pods hold a node (bound or
// reserved), then allows every waiting member.
//
// Counting and allowing happen under the gang lock, which every path that rejects the gang's
// waiting pods also holds (and those paths forget the rejected reservations before unlocking), so
// Permit never allows part of a gang whose other part is being rejected.
func (p *Plugin) Permit(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return nil, 0
	}
	st := readState(cs)
	if st == nil || st.spec == nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s was not resolved in PreFilter", key)), 0
	}
	unlock := p.res.lockGang(key)
	defer unlock()
	members := p.members(key)
	placed := p.permitPlaced(key, pod, members)
	notReady := ""
	if int32(len(placed)) >= st.spec.MinMember {
		notReady = subGroupsReady(st.spec, members, placed)
	}
	if int32(len(placed)) >= st.spec.MinMember && notReady == "" {
		var allowed []types.UID
		p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			wpod := wp.GetPod()
			if k, ok := gang.KeyOf(wpod); ok && k == key {
				if _, counted := placed[wpod.UID]; counted {
					wp.Allow(Name)
					allowed = append(allowed, wpod.UID)
				}
			}
		})
		// Allowed pods (and this one) leave the waiting list for binding but still hold their node.
		p.res.MarkAllowed(key, pod.UID)
		for _, uid := range allowed {
			p.res.MarkAllowed(key, uid)
		}
		p.res.dropHold(key) // the gang binds: the room its preemption cleared is its own now
		if len(allowed) > 0 {
			where := "the cluster"
			if st.plan != nil {
				where = st.plan.describe
			}
			p.events.gang(st.spec, nil, corev1.EventTypeNormal, ReasonGangScheduled,
				fmt.Sprintf("%d of minMember %d pods placed in %s; binding", len(placed), st.spec.MinMember, where))
		}
		return nil, 0
	}
	// Bring the rest of the gang to the front of the queue.
	if d, err := cs.Read(framework.PodsToActivateKey); err == nil {
		if pta, ok := d.(*framework.PodsToActivate); ok {
			pta.Lock()
			for _, m := range members {
				if _, ok := placed[m.UID]; !ok && m.Spec.NodeName == "" && m.UID != pod.UID {
					pta.Map[m.Namespace+"/"+m.Name] = m
				}
			}
			pta.Unlock()
		}
	}
	if notReady != "" {
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("gang %s waits: %s", key, notReady)), p.permitTimeout
	}
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d more pod(s) of gang %s", int(st.spec.MinMember)-len(placed), key)), p.permitTimeout
}
