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
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/webhook/defaults"
)

// deps is what every handler shares: the cached reader, the decoder and the compiled policies.
type deps struct {
	reader   reader
	decoder  admission.Decoder
	policies *policyCache
	nsWait   time.Duration
}

func newDeps(r reader, scheme *runtime.Scheme, opts Options) *deps {
	opts = opts.withDefaults()
	return &deps{
		reader:   r,
		decoder:  admission.NewDecoder(scheme),
		policies: newPolicyCache(r),
		nsWait:   opts.NamespaceWait,
	}
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
	var ns corev1.Namespace
	deadline := time.Now().Add(d.nsWait)
	for {
		err := d.reader.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if err == nil {
			return defaults.NamespaceOf(&ns), nil
		}
		if !apierrors.IsNotFound(err) {
			return defaults.Namespace{}, fmt.Errorf("reading namespace %q from the cache: %w", name, err)
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

// priorityClass reads a PriorityClass from the cache; nil without error when it does not exist.
func (d *deps) priorityClass(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	var pc schedulingv1.PriorityClass
	if err := d.reader.Get(ctx, client.ObjectKey{Name: name}, &pc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading PriorityClass %q from the cache: %w", name, err)
	}
	return &pc, nil
}
