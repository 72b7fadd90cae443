package hyperjob

import (
	"context"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// New children are written only on policy inputs the apiserver confirms: with a policy the cache has
// not seen yet, nothing is written and the pass is retried; with the policy cached, the queue is
// refused; with no policy at all, the child is created.
func TestChildrenWrittenOnlyOnConfirmedPolicies(t *testing.T) {
	nsObj, pol := builders.CachedTenant()
	ns := nsObj.Name
	hj := builders.MakeHyperJob(ns, "train").ReplicatedJobs(trainingv1alpha1.ReplicatedJob{Name: "a", Replicas: 1,
		TemplateSpec: batchv1alpha1.JobSpec{Queue: "gpu", MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}}).Obj()
	hj.UID, hj.ResourceVersion = "hj-uid", "3"

	build := func(objs ...client.Object) client.WithWatch {
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
			WithIndex(&batchv1alpha1.Job{}, controllerUIDIndex, indexByController).
			WithIndex(&batchv1alpha1.Job{}, heldIndex, indexHeld).
			WithIndex(&policyv1alpha1.PropagationPolicy{}, controllerUIDIndex, indexByController).
			Build()
	}
	for _, tc := range []struct {
		name         string
		cached, live []client.Object
		stale        bool
		refused      bool
		children     int
	}{
		{name: "policy not in the cache yet", cached: []client.Object{nsObj, hj}, live: []client.Object{nsObj, hj, pol}, stale: true},
		{name: "policy cached", cached: []client.Object{nsObj, hj, pol}, live: []client.Object{nsObj, hj, pol}, refused: true},
		{name: "no policy", cached: []client.Object{nsObj, hj}, live: []client.Object{nsObj, hj}, children: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := build(deepCopies(tc.cached)...)
			r := &Reconciler{client: cached, apiReader: build(deepCopies(tc.live)...), recorder: record.NewFakeRecorder(100),
				childRecorder: record.NewFakeRecorder(100), exp: newExpectations()}
			res, err := r.syncVCJobAndPP(context.Background(), hj.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, tc.stale, res.staleCache, "stale cache")
			if tc.refused {
				require.NotNil(t, res.plan)
				require.NotNil(t, res.plan.Tenancy, "queue refused")
				assert.Equal(t, ReasonQueueNotAllowed, res.plan.Tenancy.Reason)
			}
			var jobs batchv1alpha1.JobList
			require.NoError(t, cached.List(context.Background(), &jobs, client.InNamespace(ns)))
			assert.Len(t, jobs.Items, tc.children, "children written")
		})
	}
}

func deepCopies(objs []client.Object) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject().(client.Object)
	}
	return out
}
