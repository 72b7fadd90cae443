package webhook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// deps is what every handler shares: the cached reader and the compiled policies.
type deps struct {
	reader reader
	// live reads from the apiserver where a cache miss must be confirmed (the PodGroup gate); nil
	// (unit tests, whose fake reader is already live): the cache's answer stands.
	live     reader
	policies *policyCache
	nsWait   time.Duration
	// noPodGroupGate: controllers/podgroup does not run, so the PodGroup gate admits every pod.
	noPodGroupGate bool
	// excluded are the namespaces the handlers never judge (Options.ExcludedNamespaces).
	excluded map[string]bool

	// Namespaces and PriorityClasses straight from their informers' stores (Setup wires them): the
	// handlers only read these objects, so they skip the deep copy a cached Get makes. nil (unit
	// tests with a fake client): read through reader.
	namespaces, priorityClasses store
	// queues are Volcano's Queues (Setup wires them with the Volcano Job handlers, for
	// volcanoQueueRefusal); nil: Queues are not judged.
	queues store
	// volcanoJobWebhook: Volcano's job validation (validatejob.volcano.sh) is registered with this
	// cluster's apiserver, so a Job it refuses is left to it (volcanoRefusal). Setup keeps it current
	// from the ValidatingWebhookConfiguration informer; false until then.
	volcanoJobWebhook atomic.Bool
}

// store is the read side of an informer's store. Objects it returns are shared with the informer
// and must not be changed.
type store interface {
	GetByKey(key string) (item any, exists bool, err error)
}

func newDeps(r reader, opts Options) *deps {
	opts = opts.withDefaults()
	d := &deps{
		reader:   r,
		policies: newPolicyCache(r),
		nsWait:   opts.NamespaceWait,
		excluded: map[string]bool{},
	}
	for _, n := range opts.ExcludedNamespaces {
		d.excluded[n] = true
	}
	return d
}

// storeOf returns the store behind a controller-runtime informer (a client-go shared informer).
// An informer without one is an error rather than a silent fall back to deep-copying Gets, so a
// controller-runtime upgrade that changes this fails every test that sets the webhooks up.
func storeOf(inf any, what string) (store, error) {
	if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
		return s.GetStore(), nil
	}
	return nil, fmt.Errorf("webhook: the manager's %s informer (%T) has no store to read from", what, inf)
}

// policyCache holds the WorkloadPolicies compiled into a *defaults.Policies. The WorkloadPolicy
// informer marks it stale on every event; the next request rebuilds it from the cache's list, so
// a burst of policy events costs one rebuild and a request in the steady state costs one atomic load.
type policyCache struct {
	reader reader
	stale  atomic.Bool
	cur    atomic.Pointer[defaults.Policies]
	mu     sync.Mutex // one rebuild at a time
}

func newPolicyCache(r reader) *policyCache {
	c := &policyCache{reader: r}
	c.stale.Store(true)
	return c
}

func (c *policyCache) invalidate() { c.stale.Store(true) }

// get returns the compiled policies, rebuilding them first when a policy changed since the last build.
func (c *policyCache) get(ctx context.Context) (*defaults.Policies, error) {
	if p := c.cur.Load(); p != nil && !c.stale.Load() {
		return p, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.cur.Load(); p != nil && !c.stale.Load() {
		return p, nil
	}
	// Clear the flag before listing: an event that lands during the list marks it again, so the
	// next request rebuilds; the informer updates its store before it calls the handler.
	c.stale.Store(false)
	var list hbv1.WorkloadPolicyList
	if err := c.reader.List(ctx, &list); err != nil {
		c.stale.Store(true)
		return nil, fmt.Errorf("listing WorkloadPolicies from the cache: %w", err)
	}
	pols, err := defaults.NewPolicies(list.Items)
	if err != nil {
		// The valid policies are still usable; the policy controller reports the invalid ones.
		logf.FromContext(ctx).Error(err, "some WorkloadPolicies are left out")
	}
	policyCount.Set(float64(pols.Len()))
	c.cur.Store(pols)
	return pols, nil
}

// namespace reads the request's namespace from the cache. A namespace created a moment ago may not
// have reached the informer yet, so a miss is retried for up to nsWait before it is reported.
func (d *deps) namespace(ctx context.Context, name string) (defaults.Namespace, error) {
	if name == "" {
		return defaults.Namespace{}, nil
	}
	deadline := time.Now().Add(d.nsWait)
	for {
		ns, err := d.getNamespace(ctx, name)
		if err != nil {
			return defaults.Namespace{}, fmt.Errorf("reading namespace %q from the cache: %w", name, err)
		}
		if ns != nil {
			return defaults.NamespaceOf(ns), nil
		}
		if time.Now().After(deadline) {
			return defaults.Namespace{}, fmt.Errorf("namespace %q is not in hyperbatch's cache (waited %s); retry", name, d.nsWait)
		}
		select {
		case <-ctx.Done():
			return defaults.Namespace{}, fmt.Errorf("namespace %q is not in hyperbatch's cache: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// getNamespace is the cached namespace (read-only), nil when the cache does not have it.
func (d *deps) getNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return cached(ctx, d.namespaces, d.reader, name, func() *corev1.Namespace { return &corev1.Namespace{} })
}

// priorityClass reads a PriorityClass from the cache (read-only); nil without error when it does
// not exist.
func (d *deps) priorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	pc, err := cached(ctx, d.priorityClasses, d.reader, name, func() *schedulingv1.PriorityClass { return &schedulingv1.PriorityClass{} })
	if err != nil {
		return nil, fmt.Errorf("reading PriorityClass %q from the cache: %w", name, err)
	}
	return pc, nil
}

// cached reads the cluster-scoped object name from s, or through r into a newObj() when there is
// no store. It returns nil without error when the object does not exist.
func cached[T client.Object](ctx context.Context, s store, r reader, name string, newObj func() T) (T, error) {
	var none T
	if s == nil {
		obj := newObj()
		if err := r.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return none, nil
			}
			return none, err
		}
		return obj, nil
	}
	item, ok, err := s.GetByKey(name) // a cluster-scoped object's key is its name
	if err != nil || !ok {
		return none, err
	}
	got, isT := item.(T)
	if !isT {
		return none, fmt.Errorf("the informer's store holds a %T, not a %T", item, none)
	}
	return got, nil
}
