package hyperjob

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"
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
