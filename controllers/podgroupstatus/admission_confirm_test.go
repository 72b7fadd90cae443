package podgroupstatus

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

func testQueue(rv string, state schedulingv1beta1.QueueState, capGPUs int64) *schedulingv1beta1.Queue {
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q", ResourceVersion: rv},
		Status: schedulingv1beta1.QueueStatus{State: state}}
	if capGPUs > 0 {
		q.Spec.Capability = gpu(capGPUs)
	}
	return q
}

// deciding builds a Reconciler whose cache holds cached and whose apiserver holds stored (either may
// be nil: no such Queue), and counts the reads of the apiserver.
func deciding(t *testing.T, cached, stored *schedulingv1beta1.Queue) (*Reconciler, *int) {
	t.Helper()
	s := scheme.New()
	byQueue := func(o client.Object) []string { return []string{queueOf(o.(*schedulingv1beta1.PodGroup))} }
	cache := fake.NewClientBuilder().WithScheme(s).WithIndex(&schedulingv1beta1.PodGroup{}, queueIndex, byQueue)
	if cached != nil {
		cache = cache.WithObjects(cached)
	}
	live := fake.NewClientBuilder().WithScheme(s)
	if stored != nil {
		live = live.WithObjects(stored)
	}
	reads := new(int)
	live = live.WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		*reads++
		return c.Get(ctx, key, obj, opts...)
	}})
	return &Reconciler{client: cache.Build(), live: live.Build(), written: map[types.NamespacedName]writeRecord{},
		queueLocks: map[string]*sync.Mutex{}}, reads
}

// A decision to enqueue is confirmed against the stored Queue, and taken again when the cache lags
// behind it; a refusal costs no apiserver read.
func TestAdmissionConfirmedWithStoredQueue(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1, Queue: "q", MinResources: ptrTo(gpu(4))}}
	for _, tc := range []struct {
		name           string
		cached, stored *schedulingv1beta1.Queue
		admit          bool
		reason         string
		reads          int
	}{
		{name: "cache current: admitted", cached: testQueue("10", schedulingv1beta1.QueueStateOpen, 8), stored: testQueue("10", schedulingv1beta1.QueueStateOpen, 8), admit: true, reason: ReasonEnqueued, reads: 1},
		{name: "closed since the cache saw it", cached: testQueue("10", "", 0), stored: testQueue("11", schedulingv1beta1.QueueStateClosed, 0), reason: ReasonQueueClosed, reads: 1},
		{name: "capability lowered since", cached: testQueue("10", schedulingv1beta1.QueueStateOpen, 8), stored: testQueue("11", schedulingv1beta1.QueueStateOpen, 2), reason: ReasonQueueCapabilityExceeded, reads: 1},
		{name: "deleted since", cached: testQueue("10", schedulingv1beta1.QueueStateOpen, 0), stored: nil, reason: ReasonQueueNotFound, reads: 1},
		{name: "opened since: newer Queue still admits", cached: testQueue("10", schedulingv1beta1.QueueStateOpen, 0), stored: testQueue("12", schedulingv1beta1.QueueStateOpen, 0), admit: true, reason: ReasonEnqueued, reads: 1},
		{name: "refused from the cache: no read", cached: testQueue("10", schedulingv1beta1.QueueStateClosed, 0), stored: testQueue("11", schedulingv1beta1.QueueStateOpen, 0), reason: ReasonQueueClosed, reads: 0},
		{name: "missing in the cache: no read", cached: nil, stored: testQueue("11", schedulingv1beta1.QueueStateOpen, 0), reason: ReasonQueueNotFound, reads: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, reads := deciding(t, tc.cached, tc.stored)
			v, err := r.admission(context.Background(), pg)
			require.NoError(t, err)
			assert.Equal(t, tc.admit, v.admit, "admit (verdict %+v)", v)
			assert.Equal(t, tc.reason, v.reason, "reason")
			assert.Equal(t, tc.reads, *reads, "apiserver reads of the Queue")
			// An admission holds a reservation for the write; a refusal holds none, also when the
			// cached verdict had reserved.
			want := schedulingv1beta1.PodGroupPhase("")
			if tc.admit {
				want = schedulingv1beta1.PodGroupInqueue
			}
			assert.Equal(t, want, r.written[client.ObjectKeyFromObject(pg)].phase, "reservation")
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
