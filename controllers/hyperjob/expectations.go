package hyperjob

import (
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// expectationTimeout bounds how long a HyperJob waits for the cache to show the controller's own
// writes (e.g. a child created and at once deleted by someone else is never seen).
const expectationTimeout = time.Minute

// expectations remember, per HyperJob, the child writes this process made whose results the cache
// has not shown yet — the Kubernetes controllers' "expectations". Until they are met, a pass writes
// nothing: the informers run independently, so the HyperJob's own events can arrive before the
// Volcano Jobs it just created are in the cache, and a pass acting on that view would repeat
// creates (AlreadyExists), deletes and applies. The events that satisfy an expectation are the ones
// that trigger the next pass. Expectations live in memory only: after a restart the cache starts
// from a fresh, consistent list.
type expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*pending
}

type pending struct {
	uid       types.UID            // of the HyperJob
	creates   map[string]types.UID // Volcano Job name → UID created
	deletes   map[string]types.UID // Volcano Job name → UID deleted
	applies   map[string]string    // PropagationPolicy name → ppStateKey applied
	ppDeletes map[string]types.UID // PropagationPolicy name → UID deleted
	deadline  time.Time
}

func newExpectations() *expectations { return &expectations{m: map[types.NamespacedName]*pending{}} }

// hyperJobRef identifies a HyperJob incarnation: a HyperJob deleted and recreated under the same name
// starts with no expectations.
type hyperJobRef struct {
	key types.NamespacedName
	uid types.UID
}

func (e *expectations) entry(hj hyperJobRef) *pending {
	p := e.m[hj.key]
	if p == nil || p.uid != hj.uid {
		p = &pending{uid: hj.uid, creates: map[string]types.UID{}, deletes: map[string]types.UID{},
			applies: map[string]string{}, ppDeletes: map[string]types.UID{}}
		e.m[hj.key] = p
	}
	p.deadline = time.Now().Add(expectationTimeout)
	return p
}

func (e *expectations) created(hj hyperJobRef, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(hj).creates[name] = uid
}

func (e *expectations) deleted(hj hyperJobRef, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(hj).deletes[name] = uid
}

func (e *expectations) applied(hj hyperJobRef, name, hash string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(hj).applies[name] = hash
}

func (e *expectations) deletedPP(hj hyperJobRef, name string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(hj).ppDeletes[name] = uid
}

func (e *expectations) forget(hj types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, hj)
}

// satisfied drops every expectation the cached children meet and reports whether none is left
// (or they expired). When some are left it returns how long until they expire.
func (e *expectations) satisfied(hj hyperJobRef, jobs map[string]*batchv1alpha1.Job, pps map[string]*policyv1alpha1.PropagationPolicy) (bool, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.m[hj.key]
	if p == nil || p.uid != hj.uid {
		delete(e.m, hj.key)
		return true, 0
	}
	for name := range p.creates {
		if jobs[name] != nil {
			delete(p.creates, name)
		}
	}
	for name, uid := range p.deletes {
		if j := jobs[name]; j == nil || j.UID != uid || j.DeletionTimestamp != nil {
			delete(p.deletes, name)
		}
	}
	for name, h := range p.applies {
		if pp := pps[name]; pp != nil && ppStateKey(pp) == h {
			delete(p.applies, name)
		}
	}
	for name, uid := range p.ppDeletes {
		if pp := pps[name]; pp == nil || pp.UID != uid || pp.DeletionTimestamp != nil {
			delete(p.ppDeletes, name)
		}
	}
	left := time.Until(p.deadline)
	if len(p.creates)+len(p.deletes)+len(p.applies)+len(p.ppDeletes) == 0 || left <= 0 {
		delete(e.m, hj.key)
		return true, 0
	}
	return false, left
}

// ppStateKey is what an apply of a PropagationPolicy is expected to show in the cache: its spec hash
// label, and whether it holds dispatching (which the hash leaves out, dispatch.go).
func ppStateKey(pp *policyv1alpha1.PropagationPolicy) string {
	if suspended(pp) {
		return pp.Labels[hbv1.PPSpecHashLabel] + "/held"
	}
	return pp.Labels[hbv1.PPSpecHashLabel]
}
