package gang

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tracker remembers the gang pods this scheduler has assumed (reserved on a node, not yet bound).
// Bound pods are read from the pod informer; Placed merges both.
type Tracker struct {
	mu      sync.Mutex
	assumed map[Key]map[types.UID]Assumed
}

// Assumed is one reserved pod.
type Assumed struct {
	Pod  *corev1.Pod
	Node string
	// Allowed is set once Permit let the pod through to binding: it no longer waits, yet still
	// holds its node until it is bound (or Unreserve forgets it).
	Allowed bool
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{assumed: map[Key]map[types.UID]Assumed{}} }

// Assume records that pod is reserved on node.
func (t *Tracker) Assume(key Key, pod *corev1.Pod, node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.assumed[key]
	if m == nil {
		m = map[types.UID]Assumed{}
		t.assumed[key] = m
	}
	m[pod.UID] = Assumed{Pod: pod, Node: node}
}

// MarkAllowed records that Permit let the reserved pod bind (no-op if it is not reserved).
func (t *Tracker) MarkAllowed(key Key, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.assumed[key][uid]; ok {
		a.Allowed = true
		t.assumed[key][uid] = a
	}
}

// Forget drops a reservation (unreserved, bound or deleted pod).
func (t *Tracker) Forget(key Key, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.assumed[key]; m != nil {
		delete(m, uid)
		if len(m) == 0 {
			delete(t.assumed, key)
		}
	}
}

// Assumed returns a copy of the gang's reservations.
func (t *Tracker) Assumed(key Key) map[types.UID]Assumed {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[types.UID]Assumed, len(t.assumed[key]))
	for k, v := range t.assumed[key] {
		out[k] = v
	}
	return out
}

// Placed returns the gang's pods that hold a node: bound members (NodeName set) and reservations,
// by pod UID.
func (t *Tracker) Placed(key Key, members []*corev1.Pod) map[types.UID]string {
	out := map[types.UID]string{}
	for _, p := range members {
		if p.Spec.NodeName != "" {
			out[p.UID] = p.Spec.NodeName
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, a := range t.assumed[key] {
		if _, bound := out[uid]; !bound {
			out[uid] = a.Node
		}
	}
	return out
}
