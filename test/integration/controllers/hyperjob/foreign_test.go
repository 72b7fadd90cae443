package hyperjob

import (
	"context"
	"slices"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// Karmada's keys as its webhook and controllers write them on PropagationPolicies and resource
// templates (pkg/apis/policy/v1alpha1/well_known_constants.go and pkg/util/constants.go in Karmada v1.16.0;
// the finalizer is the one Karmada puts on PropagationPolicies, used here as any foreign finalizer).
const (
	karmadaPermanentID = "propagationpolicy.karmada.io/permanent-id"
	karmadaFinalizer   = "karmada.io/propagation-policy-controller"
)

// TestForeignKeysSurvive: what Karmada writes on our PropagationPolicies and child Jobs (its
// permanent-id label, which its validator refuses to see dropped, and a finalizer) survives a
// reconcile that updates the PropagationPolicy, and a reconcile with nothing to do writes nothing.
func TestForeignKeysSurvive(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-foreign-keys", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "fk").ReplicatedJobs(replicatedJob("a", 1, "member1")).Obj())
	waitForChildren(t, timeout, ns, "fk", []string{"fk-a-0"})
	key := client.ObjectKey{Namespace: ns, Name: "fk-a-0"}
	var pp policyv1alpha1.PropagationPolicy
	require.NoError(t, env.Client.Get(ctx, key, &pp))
	pp.Labels[karmadaPermanentID] = "8d7c1f0e-0000-4000-8000-000000000001"
	pp.Finalizers = append(pp.Finalizers, karmadaFinalizer)
	require.NoError(t, env.Client.Update(ctx, &pp))
	var job batchv1alpha1.Job
	require.NoError(t, env.Client.Get(ctx, key, &job))
	job.Labels[karmadaPermanentID] = "8d7c1f0e-0000-4000-8000-000000000002"
	job.Finalizers = append(job.Finalizers, karmadaFinalizer)
	require.NoError(t, env.Client.Update(ctx, &job))
	t.Cleanup(func() {
		for _, o := range []client.Object{&policyv1alpha1.PropagationPolicy{}, &batchv1alpha1.Job{}} {
			if env.Client.Get(context.Background(), key, o) == nil {
				o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(f string) bool { return f == karmadaFinalizer }))
				_ = env.Client.Update(context.Background(), o)
			}
		}
	})

	// A spec change the controller applies in place.
	updateHyperJob(t, ns, "fk", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].ClusterNames = []string{"member2"} })
	waitFor(t, timeout, "PropagationPolicy updated to member2", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, key, &pp)
		a := pp.Spec.Placement.ClusterAffinity
		return err == nil && a != nil && slices.Equal(a.ClusterNames, []string{"member2"}), err
	})
	assert.Equal(t, "8d7c1f0e-0000-4000-8000-000000000001", pp.Labels[karmadaPermanentID])
	assert.Contains(t, pp.Finalizers, karmadaFinalizer)

	// A whole reconcile with nothing to do: no write to either child.
	ppRV := pp.ResourceVersion
	require.NoError(t, env.Client.Get(ctx, key, &job))
	jobRV := job.ResourceVersion
	waitForFullReconcile(t, ns, "fk", 1)
	waitForFullReconcile(t, ns, "fk", 1)
	require.NoError(t, env.Client.Get(ctx, key, &pp))
	require.NoError(t, env.Client.Get(ctx, key, &job))
	assert.Equal(t, ppRV, pp.ResourceVersion, "PropagationPolicy written by a reconcile with nothing to do")
	assert.Equal(t, jobRV, job.ResourceVersion, "Volcano Job written by a reconcile with nothing to do")
	assert.Equal(t, "8d7c1f0e-0000-4000-8000-000000000002", job.Labels[karmadaPermanentID])
	assert.Contains(t, job.Finalizers, karmadaFinalizer)
}

// TestChildrenHeldUntilEveryOneHasACluster: on an apiserver that serves Karmada's ResourceBindings
// (no Karmada scheduler runs here, so no binding ever gets a cluster), every child's
// PropagationPolicy holds dispatching suspended, and still does after a whole reconcile.
func TestChildrenHeldUntilEveryOneHasACluster(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-held", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "held").ReplicatedJobs(replicatedJob("a", 2, "member1"), replicatedJob("b", 1, "member2")).Obj())
	_, pps := waitForChildren(t, timeout, ns, "held", []string{"held-a-0", "held-a-1", "held-b-0"})
	check := func(pps map[string]*policyv1alpha1.PropagationPolicy) {
		t.Helper()
		for n, pp := range pps {
			s := pp.Spec.Suspension
			if assert.NotNil(t, s, n) {
				assert.Equal(t, ptr.To(true), s.Dispatching, n)
			}
		}
	}
	check(pps)
	waitForFullReconcile(t, ns, "held", 3)
	_, pps, err := children(ctx, ns, "held")
	require.NoError(t, err)
	check(pps)
	evs, err := eventsFor(ctx, ns, "held", hyperjob.ReasonDispatchingChildren)
	require.NoError(t, err)
	assert.Empty(t, evs)
}
