package lifecycle

import (
	"sync"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	"k8s.io/apimachinery/pkg/types"
)

const (
	activeDeadlineKey = hbv1.ActiveDeadlineSecondsAnnotation
	ttlKey            = hbv1.TTLSecondsAfterFinishedAnnotation
)

// maxSeen bounds seenUIDs: past it the set is cleared (a deletion then observed again, after an
// update event, may be counted twice; the set normally empties itself on delete events).
const maxSeen = 100000

// seenUIDs is a bounded set of UIDs.
type seenUIDs struct {
	mu  sync.Mutex
	set map[types.UID]struct{}
}

func newSeenUIDs() *seenUIDs { return &seenUIDs{set: map[types.UID]struct{}{}} }

// add reports whether uid was not in the set, and adds it.
func (s *seenUIDs) add(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[uid]; ok {
		return false
	}
	if len(s.set) >= maxSeen {
		s.set = map[types.UID]struct{}{}
	}
	s.set[uid] = struct{}{}
	return true
}

func (s *seenUIDs) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, uid)
}
