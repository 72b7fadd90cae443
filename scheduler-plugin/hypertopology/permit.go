package hypertopology

import (
	"context"
	"fmt"
	"sync"
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
		p.tracker.Assume(key, pod, nodeName)
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
	unlock := p.lockGang(key)
	p.tracker.Forget(key, pod.UID)
	p.noteReleased(pod.UID)
	n := p.rejectWaitingLocked(key, pod.UID, fmt.Sprintf("gang %s released: member %s/%s was unreserved", key, pod.Namespace, pod.Name))
	unlock()
	if n > 0 {
		klog.FromContext(ctx).V(3).Info("Released gang", "gang", key, "pod", klog.KObj(pod), "released", n)
		if st := readState(cs); st != nil && st.spec != nil {
			p.events.gang(st.spec, pod, corev1.EventTypeWarning, ReasonGangReleased,
				fmt.Sprintf("released %d reserved pod(s): member %s was unreserved (Permit timeout or rejection)", n, pod.Name))
		}
	}
	if len(p.tracker.Assumed(key)) == 0 {
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
	unlock := p.lockGang(key)
	defer unlock()
	members := p.members(key)
	placed := p.permitPlaced(key, pod, members)
	if int32(len(placed)) >= st.spec.MinMember {
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
		p.tracker.MarkAllowed(key, pod.UID)
		for _, uid := range allowed {
			p.tracker.MarkAllowed(key, uid)
		}
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
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d more pod(s) of gang %s", int(st.spec.MinMember)-len(placed), key)), p.permitTimeout
}

// permitPlaced returns the gang's pods that really hold a node, by UID: bound members, and
// reservations that are the current pod, still wait at Permit, or were already allowed to bind. A
// reservation whose waiting pod is gone otherwise (rejected, timed out, its Unreserve not run yet)
// is not counted. The scheduling cycle is sequential, so a pod that returned Wait from Permit is in
// the waiting list before the next pod's Permit runs. Called with the gang lock held.
func (p *Plugin) permitPlaced(key gang.Key, pod *corev1.Pod, members []*corev1.Pod) map[types.UID]string {
	out := map[types.UID]string{}
	for _, m := range members {
		if m.Spec.NodeName != "" {
			out[m.UID] = m.Spec.NodeName
		}
	}
	for uid, a := range p.tracker.Assumed(key) {
		if _, bound := out[uid]; bound {
			continue
		}
		if uid == pod.UID || a.Allowed || p.handle.GetWaitingPod(uid) != nil {
			out[uid] = a.Node
		}
	}
	return out
}

// gangLock serializes Permit's count-and-allow against the paths that reject a gang's waiting pods.
type gangLock struct {
	sync.Mutex
	refs int // holders and waiters; the entry is dropped at zero
}

// lockGang locks the gang and returns the unlock function.
func (p *Plugin) lockGang(key gang.Key) (unlock func()) {
	p.mu.Lock()
	if p.gangLocks == nil {
		p.gangLocks = map[gang.Key]*gangLock{}
	}
	l := p.gangLocks[key]
	if l == nil {
		l = &gangLock{}
		p.gangLocks[key] = l
	}
	l.refs++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(p.gangLocks, key)
		}
		p.mu.Unlock()
	}
}
