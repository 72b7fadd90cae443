package hyperjob

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// TestSummariesStayApart scales a HyperJob up one child at a time, 13 passes in a few seconds, each
// with its own summary under the reason SyncedChildren. client-go's aggregator folds the 11th and
// later Events of one object, source, type and reason into "(combined from similar events)"; the
// summaries must each stay readable in `kubectl get events`.
func TestSummariesStayApart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-summaries", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "sum").ReplicatedJobs(replicatedJob("a", 1)).Obj())
	waitForChildren(t, timeout, ns, "sum", names("sum", "a", 1))
	const passes = 13
	for n := 2; n <= passes; n++ {
		updateHyperJob(t, ns, "sum", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].Replicas = int32(n) })
		waitForChildren(t, timeout, ns, "sum", names("sum", "a", n))
	}
	for i := range passes {
		waitForEvent(t, ns, "sum", hyperjob.ReasonSyncedChildren,
			fmt.Sprintf("created 1 Volcano Job (sum-a-%d)", i))
	}
	evs, err := eventsFor(ctx, ns, "sum", hyperjob.ReasonSyncedChildren)
	require.NoError(t, err)
	for _, e := range evs {
		assert.NotContains(t, e.Message, "combined from similar events")
		assert.True(t, strings.HasPrefix(e.Message, "created 1 PropagationPolicy (sum-a-"), e.Message)
	}
	assert.Len(t, evs, passes, "one Event per pass")
}
