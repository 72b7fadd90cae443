package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/lifecycle"
)

// A Volcano Job past its deadline is aborted through one AbortJob Command, decided on time, with
// reason DeadlineExceeded in an annotation and an Event; a restarted manager does not abort it again.
// (Volcano's job controller, which executes the Command, is not part of this suite.)
func TestVolcanoJobDeadline(t *testing.T) {
	ns := newNamespace(t, "vcjob-deadline")
	stop := startManager(t, ns, managerOptions{})
	create(t, newVCJob(ns, "train", 2))
	var j batchv1alpha1.Job
	require.NoError(t, get(context.Background(), &j, ns, "train"))
	requireAborted(t, ns, []batchv1alpha1.Job{j})

	require.NoError(t, get(context.Background(), &j, ns, "train"))
	decided, err := time.Parse(time.RFC3339, j.Annotations[lifecycle.DeadlineExceededAtAnnotation])
	require.NoError(t, err)
	requireWithin(t, "abort decision", j.CreationTimestamp.Time, decided, 2*time.Second)
	// The first manager's Event is written before it stops (a stopping recorder may drop one it has
	// not sent yet).
	waitEvent(t, ns, j.UID, lifecycle.ReasonDeadlineExceeded)

	// A new manager reads the recorded decision and the Command's name: nothing is repeated. Its
	// positive signal is a second job's deadline acting.
	stop()
	startManager(t, ns, managerOptions{})
	create(t, newVCJob(ns, "second", 1))
	var second batchv1alpha1.Job
	require.NoError(t, get(context.Background(), &second, ns, "second"))
	requireAborted(t, ns, []batchv1alpha1.Job{j, second})
	waitEvent(t, ns, second.UID, lifecycle.ReasonDeadlineExceeded) // the new manager has recorded its own
	es, err := events(context.Background(), ns, j.UID, lifecycle.ReasonDeadlineExceeded)
	require.NoError(t, err)
	assert.EqualValues(t, 1, eventCount(es), "the first job's abort was not repeated")
}
