package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// Every kind the registry gives a lifecycle has a reconciler here, and every reconciler serves a
// kind whose row says it has a lifecycle.
func TestEveryLifecycleRowIsServed(t *testing.T) {
	kinds := (&Reconciler{}).kindControllers()
	for _, w := range workload.WithLifecycle() {
		kc, ok := kinds[w.Kind]
		if assert.True(t, ok, "the registry gives %s a lifecycle, but no reconciler serves it", w.Kind) {
			assert.NotNil(t, kc.reconcile, w.Kind)
			assert.NotNil(t, kc.object(), w.Kind)
		}
	}
	for k := range kinds {
		w, ok := workload.Lookup(k)
		assert.True(t, ok && w.Lifecycle != nil, "a reconciler serves %s, whose registry row has no lifecycle", k)
	}
}
