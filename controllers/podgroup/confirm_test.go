package podgroup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// A JobSet whose queue the cache's policies allow is not given a PodGroup while the apiserver holds
// a policy the cache has not seen yet: the reconcile waits (requeue) and writes nothing. Once the
// cache has the policy, the queue is refused with an Event.
func TestQueueWrittenOnlyOnConfirmedPolicies(t *testing.T) {
	nsObj, pol := builders.CachedTenant()
	ns := nsObj.Name
	js := jobset(map[string]string{defaults.QueueNameAnnotation: "gpu"},
		rjob("w", 1, ptr.To[int32](2), ptr.To[int32](2), corev1.PodSpec{SchedulerName: HyperbatchSchedulerName,
			Containers: []corev1.Container{{Name: "c"}}}))
	js.Namespace = ns
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: js.Name}}

	build := func(objs ...client.Object) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	}
	for _, tc := range []struct {
		name        string
		cached      []client.Object
		requeue     bool
		wantRefusal bool
	}{
		{name: "policy not in the cache yet", cached: []client.Object{nsObj.DeepCopy(), js.DeepCopy()}, requeue: true},
		{name: "cache current", cached: []client.Object{nsObj.DeepCopy(), pol.DeepCopy(), js.DeepCopy()}, wantRefusal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := build(tc.cached...)
			rec := record.NewFakeRecorder(10)
			r := &Reconciler{client: cached, live: build(nsObj.DeepCopy(), pol.DeepCopy(), js.DeepCopy()), recorder: rec,
				phases: map[types.UID]schedulingv1beta1.PodGroupPhase{}, warned: map[types.UID]types.UID{}}
			res, err := r.Reconcile(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, tc.requeue, res.RequeueAfter > 0, "requeue (result %+v)", res)
			err = cached.Get(context.Background(), req.NamespacedName, &schedulingv1beta1.PodGroup{})
			assert.True(t, apierrors.IsNotFound(err), "no PodGroup written: %v", err)
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if tc.wantRefusal {
				require.Len(t, events, 1)
				assert.Contains(t, events[0], ReasonQueueNotAllowed)
			} else {
				assert.Empty(t, events)
			}
		})
	}
}
