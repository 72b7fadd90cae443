package lifecycle

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestAnnotations(t *testing.T) {
	o := &metav1.ObjectMeta{Annotations: map[string]string{activeDeadlineKey: "30", ttlKey: "0"}}
	d, ok, err := ActiveDeadline(o)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 30*time.Second, d)
	d, ok, err = TTLAfterFinished(o)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, d)

	for _, bad := range []string{"0", "-1", "1.5", "x"} {
		o.Annotations[activeDeadlineKey] = bad
		_, ok, err = ActiveDeadline(o)
		assert.True(t, ok)
		assert.ErrorContains(t, err, activeDeadlineKey, bad)
	}
	_, ok, err = TTLAfterFinished(&metav1.ObjectMeta{})
	assert.False(t, ok)
	assert.NoError(t, err)
}

func TestDecidedAt(t *testing.T) {
	j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{DeadlineExceededAtAnnotation: at(60).Format(time.RFC3339)}}}
	assert.Equal(t, at(60), *decidedAt(j, at(0)), "decided during this run")
	assert.Nil(t, decidedAt(j, at(61)), "decided in a run that was resumed since")
	assert.NotEqual(t, commandName(j, at(60)), commandName(j, at(61)))
}

func TestCountNativeTTL(t *testing.T) {
	registerMetrics()
	r := &Reconciler{now: func() time.Time { return at(100) }, nativeTTL: newSeenUIDs()}
	count := func() float64 {
		m := actionsTotal.WithLabelValues(KindJobSet, ActionNativeTTLDelete)
		ch := make(chan prometheus.Metric, 1)
		m.Collect(ch)
		var out dto.Metric
		require.NoError(t, (<-ch).Write(&out))
		return out.GetCounter().GetValue()
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	js.Spec.TTLSecondsAfterFinished = ptr.To[int32](10)
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(50))}}
	before := count()

	r.countNativeTTL(KindJobSet, js, at(55))
	assert.Equal(t, before, count(), "deleted 5 s before its TTL expired: someone else's deletion")
	r.countNativeTTL(KindJobSet, js, at(60))
	assert.Equal(t, before+1, count())
	r.countNativeTTL(KindJobSet, js, at(61))
	assert.Equal(t, before+1, count(), "counted once per object")

	running := js.DeepCopy()
	running.UID, running.Status.Conditions = "b", nil
	r.countNativeTTL(KindJobSet, running, at(90))
	assert.Equal(t, before+1, count(), "not finished: not a TTL deletion")
}

func TestResultKeepsEarliestDueTime(t *testing.T) {
	var r result
	r.at(at(0), at(30))
	r.at(at(0), at(10))
	r.at(at(0), at(20))
	assert.Equal(t, 10*time.Second, r.ctrl().RequeueAfter)
	r.at(at(0), at(-5))
	assert.Equal(t, time.Millisecond, r.ctrl().RequeueAfter, "overdue: at once")
}
