package hyperjob

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestPassReportsOneEventPerPass: a pass that creates 21 children reports them in one Normal Event
// (and its failures in one Warning per reason), not one Event per child.
func TestPassReportsOneEventPerPass(t *testing.T) {
	ctx := context.Background()
	p := newPass()
	for i := range 21 {
		p.did(ctx, actCreatedPP, fmt.Sprintf("hj-a-%02d", i))
		p.did(ctx, actCreatedJob, fmt.Sprintf("hj-a-%02d", i))
	}
	p.did(ctx, actRecreatedJob, "hj-b-0")
	p.failed(ctx, "FailedCreateJob", "creating Volcano Job hj-c-1: quota")
	p.failed(ctx, "FailedCreateJob", "creating Volcano Job hj-c-0: quota")
	p.failed(ctx, "ChildNameTaken", "Volcano Job hj-d-0 exists")

	rec := record.NewFakeRecorder(100)
	p.report(ctx, rec, twoByTwo())
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	require.Len(t, got, 3, "one summary and one Warning per failure reason: %v", got)
	assert.Equal(t, "Normal SyncedChildren created 21 PropagationPolicies (hj-a-00, hj-a-01, hj-a-02, … 18 more); "+
		"created 21 Volcano Jobs (hj-a-00, hj-a-01, hj-a-02, … 18 more); "+
		"deleted 1 Volcano Job to recreate from the changed template (hj-b-0)", got[0])
	assert.Equal(t, "Warning ChildNameTaken Volcano Job hj-d-0 exists", got[1])
	assert.True(t, strings.HasPrefix(got[2], "Warning FailedCreateJob 2 children: creating Volcano Job hj-c-0: quota (and 1 more)"), got[2])

	// A pass that did nothing reports nothing.
	rec = record.NewFakeRecorder(1)
	newPass().report(ctx, rec, twoByTwo())
	assert.Empty(t, rec.Events)
}

// TestSummariesAreNotCombined feeds twelve per-pass summaries of one HyperJob (same source, object,
// type and reason, different messages) through client-go's EventCorrelator: with the default key
// the last ones are folded into "(combined from similar events)", with aggregateByMessage each
// keeps its own message, and a repeated message is still deduplicated by count.
func TestSummariesAreNotCombined(t *testing.T) {
	hj := twoByTwo()
	event := func(i int) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i), Namespace: hj.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "HyperJob", Namespace: hj.Namespace, Name: hj.Name, UID: hj.UID},
			Source:         corev1.EventSource{Component: eventSourceChildren},
			Type:           corev1.EventTypeNormal,
			Reason:         ReasonSyncedChildren,
			Message:        fmt.Sprintf("created 1 Volcano Job (%s-a-%d)", hj.Name, i),
			Count:          1,
		}
	}
	correlate := func(c *record.EventCorrelator) []string {
		var msgs []string
		for i := range 12 {
			res, err := c.EventCorrelate(event(i))
			require.NoError(t, err)
			msgs = append(msgs, res.Event.Message)
		}
		return msgs
	}
	clk := clocktesting.NewFakeClock(time.Now())
	def := correlate(record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clk}))
	assert.Contains(t, def[11], "combined from similar events", "client-go's default key folds the 11th summary (the test's premise)")

	ours := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clk, KeyFunc: aggregateByMessage})
	for i, m := range correlate(ours) {
		assert.Equal(t, fmt.Sprintf("created 1 Volcano Job (%s-a-%d)", hj.Name, i), m)
	}
	again, err := ours.EventCorrelate(event(3))
	require.NoError(t, err)
	assert.Equal(t, int32(2), again.Event.Count, "the same summary twice is one Event with count 2")
}
