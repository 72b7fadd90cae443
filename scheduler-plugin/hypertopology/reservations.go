package hypertopology

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// This file is the plugin's gang-reservation bookkeeping: which gang pods hold a node without being
// bound (reservations), the per-gang locks that keep Permit's count-and-allow atomic against every
// rejection, the reservations the plugin gave back itself, and the helpers that reject a gang's
// waiting pods.
//
// # Locks, in the only order they may be taken
//
//  1. A gang lock (reservations.lockGang, one per gang): held by Permit while it counts the gang's
//     reservations and allows its waiting pods, and by every path that rejects a gang's waiting
//     pods (Unreserve, PostFilter, releaseYounger for each victim, revalidateWaiting, PodGroup
//     deletion), which forget the rejected reservations before unlocking. Never two gang locks at
//     once (victims are locked one after another, never under the reclaiming gang's lock), and
//     never taken while holding the tree's read lock, p.mu or reservations.mu.
//  2. The tree cache's lock (topology.Cache.Read): domain choice and revalidation read the tree
//     under it; they may take p.mu and reservations.mu inside, but no gang lock
//     (revalidateWaiting collects its verdicts under the read lock and rejects after releasing it).
//  3. Leaf locks, held only for a map access and never while taking another lock: p.mu (plans,
//     queueTimes), reservations.mu (reservations, gang locks' bookkeeping, released), the event
//     recorder's mutex, and the framework's waiting-pod map (IterateOverWaitingPods calls back under
//     its read lock: callbacks only Allow/Reject and record UIDs).
//
// So a gang lock may be followed by 3; the tree lock by 3; nothing is taken under 3. Pod informer
// reads (p.members, the PodGroup lister) take the informers' own locks and are safe anywhere.

// reservations remembers the gang pods this scheduler has assumed (reserved on a node, not yet
// bound). Bound pods are read from the pod informer; Placed merges both.
type reservations struct {
	mu      sync.Mutex
	assumed map[gang.Key]map[types.UID]assumed
	// locks (under mu) serialize Permit against rejections, per gang; see lockGang.
	locks map[gang.Key]*gangLock
	// released (under mu) holds the UIDs of reservations the plugin gave back, with when, so that
	// the scheduler's assigned-pod-delete event for them does not requeue the same gang.
	released map[types.UID]time.Time
}

// assumed is one reserved pod.
type assumed struct {
	Pod  *corev1.Pod
	Node string
	// Allowed is set once Permit let the pod through to binding: it no longer waits, yet still
	// holds its node until it is bound (or Unreserve forgets it).
	Allowed bool
}

// releasedTTL is how long a released reservation is remembered: the scheduler emits its
// assigned-pod-delete event right after Unreserve, so this only has to outlive that.
const releasedTTL = time.Minute

func newReservations() *reservations {
	return &reservations{assumed: map[gang.Key]map[types.UID]assumed{}}
}

// Assume records that pod is reserved on node.
func (r *reservations) Assume(key gang.Key, pod *corev1.Pod, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.assumed[key]
	if m == nil {
		m = map[types.UID]assumed{}
		r.assumed[key] = m
	}
	m[pod.UID] = assumed{Pod: pod, Node: node}
}

// MarkAllowed records that Permit let the reserved pod bind (no-op if it is not reserved).
func (r *reservations) MarkAllowed(key gang.Key, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.assumed[key][uid]; ok {
		a.Allowed = true
		r.assumed[key][uid] = a
	}
}

// Forget drops a reservation (unreserved, bound or deleted pod).
func (r *reservations) Forget(key gang.Key, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.assumed[key]; m != nil {
		delete(m, uid)
		if len(m) == 0 {
			delete(r.assumed, key)
		}
	}
}

// Assumed returns a copy of the gang's reservations.
func (r *reservations) Assumed(key gang.Key) map[types.UID]assumed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]assumed, len(r.assumed[key]))
	for k, v := range r.assumed[key] {
		out[k] = v
	}
	return out
}

// Placed returns the gang's pods that hold a node: bound members (NodeName set) and reservations,
// by pod UID.
func (r *reservations) Placed(key gang.Key, members []*corev1.Pod) map[types.UID]string {
	out := map[types.UID]string{}
	for _, p := range members {
		if p.Spec.NodeName != "" {
			out[p.UID] = p.Spec.NodeName
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, a := range r.assumed[key] {
		if _, bound := out[uid]; !bound {
			out[uid] = a.Node
		}
	}
	return out
}

// noteReleased remembers that the plugin itself gave back the reservation of pod uid.
func (r *reservations) noteReleased(uid types.UID) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released == nil {
		r.released = map[types.UID]time.Time{}
	}
	for u, t := range r.released { // keep the set short-lived
		if now.Sub(t) > releasedTTL {
			delete(r.released, u)
		}
	}
	r.released[uid] = now
}

// wasReleased reports whether the plugin recently gave back the reservation of pod uid.
func (r *reservations) wasReleased(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.released[uid]
	return ok && time.Since(t) <= releasedTTL
}

// gangLock serializes Permit's count-and-allow against the paths that reject a gang's waiting pods.
type gangLock struct {
	sync.Mutex
	refs int // holders and waiters; the entry is dropped at zero
}

// lockGang locks the gang and returns the unlock function.
func (r *reservations) lockGang(key gang.Key) (unlock func()) {
	r.mu.Lock()
	if r.locks == nil {
		r.locks = map[gang.Key]*gangLock{}
	}
	l := r.locks[key]
	if l == nil {
		l = &gangLock{}
		r.locks[key] = l
	}
	l.refs++
	r.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, key)
		}
		r.mu.Unlock()
	}
}

// waitingByGang groups the pods waiting at Permit by gang.
func (p *Plugin) waitingByGang() map[gang.Key][]fwk.WaitingPod {
	out := map[gang.Key][]fwk.WaitingPod{}
	p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if k, ok := gang.KeyOf(wp.GetPod()); ok {
			out[k] = append(out[k], wp)
		}
	})
	return out
}

// rejectWaiting rejects every waiting pod of the gang except skip; it returns how many.
func (p *Plugin) rejectWaiting(key gang.Key, skip types.UID, msg string) int {
	unlock := p.res.lockGang(key)
	defer unlock()
	return p.rejectWaitingLocked(key, skip, msg)
}

// rejectWaitingLocked is rejectWaiting with the gang lock held by the caller. The rejected pods'
// reservations are forgotten before the lock is released, so Permit never counts them.
//
// Pods Permit has already allowed are skipped: they may still be listed as waiting until their
// binding goroutine picks the decision up, a Reject can no longer undo the Allow, and they hold
// their node until bound, so their reservations must stay counted.
func (p *Plugin) rejectWaitingLocked(key gang.Key, skip types.UID, msg string) int {
	var rejected []types.UID
	reserved := p.res.Assumed(key)
	p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		pod := wp.GetPod()
		if k, ok := gang.KeyOf(pod); ok && k == key && pod.UID != skip && !reserved[pod.UID].Allowed {
			wp.Reject(Name, msg)
			rejected = append(rejected, pod.UID)
		}
	})
	for _, uid := range rejected {
		p.res.Forget(key, uid)
		p.res.noteReleased(uid)
	}
	return len(rejected)
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
	for uid, a := range p.res.Assumed(key) {
		if _, bound := out[uid]; bound {
			continue
		}
		if uid == pod.UID || a.Allowed || p.handle.GetWaitingPod(uid) != nil {
			out[uid] = a.Node
		}
	}
	return out
}
