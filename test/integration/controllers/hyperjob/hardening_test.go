package hyperjob

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/internal/naming"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// waitForCondition waits until the HyperJob's condition of this type is True with the reason and
// returns it.
func waitForCondition(t *testing.T, ns, name, typ, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	waitFor(t, timeout, fmt.Sprintf("%s=True (%s) on %s", typ, reason, name), func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, name)
		if err != nil {
			return false, err
		}
		c = apimeta.FindStatusCondition(hj.Status.Conditions, typ)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason && hj.Status.ObservedGeneration == hj.Generation, nil
	})
	return c
}

// A tenant's HyperJob of 3 × 100,000 children (no webhook runs here) is refused by the controller
// with a condition naming the field, the total and the limit; nothing is created, and the manager's
// allocations stay small (before the bound, planning it alone allocated about 660 MiB).
func TestTooManyChildrenCreatesNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-bounds", nil)
	startManager(t, testConfig(), ns)
	// Let the manager's start-up allocations settle before measuring.
	create(t, builders.MakeHyperJob(ns, "warm").ReplicatedJobs(replicatedJob("a", 1)).Obj())
	waitForChildren(t, timeout, ns, "warm", names("warm", "a", 1))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	create(t, builders.MakeHyperJob(ns, "huge").ReplicatedJobs(replicatedJob("a", 100000), replicatedJob("b", 100000), replicatedJob("c", 100000)).Obj())
	c := waitForCondition(t, ns, "huge", hyperjob.ConditionSpecInvalid, hyperjob.ReasonTooManyChildren)
	runtime.ReadMemStats(&after)
	assert.Contains(t, c.Message, "spec.replicatedJobs")
	assert.Contains(t, c.Message, "100000 child jobs")
	assert.Contains(t, c.Message, fmt.Sprintf("limit of %d", naming.MaxChildren))

	jobs, pps, err := children(ctx, ns, "huge")
	require.NoError(t, err)
	assert.Empty(t, jobs, "no Volcano Job may be created")
	assert.Empty(t, pps, "no PropagationPolicy may be created")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("process allocations while refusing 300,000 children: %.1f MiB; heap %.1f → %.1f MiB",
		float64(allocated)/(1<<20), float64(before.HeapAlloc)/(1<<20), float64(after.HeapAlloc)/(1<<20))
	assert.Less(t, allocated, uint64(64<<20), "refusing must not allocate per requested child")
}

// The durable record: a child that finishes and is deleted while the manager is down (so before its
// state is in the HyperJob's status) is held by the finalizer until the restarted controller has
// recorded it, then let go, and never recreated.
func TestFinishedChildDeletedWhileManagerDownIsNotRecreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-durable", nil)
	stop := startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "d").ReplicatedJobs(replicatedJob("a", 2)).Obj())
	jobs, _ := waitForChildren(t, timeout, ns, "d", names("d", "a", 2))
	require.Equal(t, []string{hbv1.HyperJobChildFinalizer}, jobs["d-a-0"].Finalizers)
	require.Nil(t, jobs["d-a-0"].Spec.TTLSecondsAfterFinished, "children have no TTL of their own")
	// The controller writes status right after the creates; stopping it before that write lands
	// would leave nothing to compare with below.
	waitFor(t, timeout, "both children in status", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "d")
		if err != nil {
			return false, err
		}
		return hj.Status.ObservedGeneration == hj.Generation && len(hj.Status.ReplicatedJobsStatus) == 1 &&
			len(hj.Status.ReplicatedJobsStatus[0].JobStates) == 2, nil
	})
	stop()

	// The manager is down: the child finishes and is deleted at once (as a short TTL or a user would).
	setJobStatus(t, ns, "d-a-0", batchv1alpha1.Completed, nil)
	require.NoError(t, env.Client.Delete(ctx, jobs["d-a-0"]))
	var held batchv1alpha1.Job
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d-a-0"}, &held))
	require.NotNil(t, held.DeletionTimestamp, "deleted, but held by the finalizer")
	hj, err := getHyperJob(ctx, ns, "d")
	require.NoError(t, err)
	require.Len(t, hj.Status.ReplicatedJobsStatus, 1)
	require.NotEqual(t, batchv1alpha1.Completed, hj.Status.ReplicatedJobsStatus[0].JobStates["d-a-0"].Phase, "not recorded yet")

	startManager(t, testConfig(), ns)
	waitFor(t, timeout, "d-a-0 recorded as Completed and then let go", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "d")
		if err != nil || len(hj.Status.ReplicatedJobsStatus) != 1 || hj.Status.ReplicatedJobsStatus[0].JobStates["d-a-0"].Phase != batchv1alpha1.Completed {
			return false, err
		}
		jobs, _, err := children(ctx, ns, "d")
		if err != nil {
			return false, err
		}
		if j := jobs["d-a-0"]; j != nil {
			return false, fmt.Errorf("d-a-0 still exists (UID %s, deleting %v)", j.UID, j.DeletionTimestamp != nil)
		}
		return true, nil
	})
	waitForFullReconcile(t, ns, "d", 2)
	got, pps, err := children(ctx, ns, "d")
	require.NoError(t, err)
	assert.Equal(t, []string{"d-a-1"}, keys(got), "the finished child is not recreated")
	assert.Equal(t, []string{"d-a-1"}, keys(pps), "its PropagationPolicy went with it")

	setJobStatus(t, ns, "d-a-1", batchv1alpha1.Completed, nil)
	c := waitForCondition(t, ns, "d", hyperjob.ConditionCompleted, hyperjob.ReasonChildrenCompleted)
	assert.Contains(t, c.Message, "2 of 2")
}

// With 21 children (42 objects to create, beyond the recorder's burst of 25 per object), the Events
// that matter still arrive: one summary per pass, the rollout's RecreatingJob and ChildJobsCompleted.
func TestEventsOfManyChildrenArrive(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-events", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "ev").ReplicatedJobs(replicatedJob("a", 20), replicatedJob("b", 1)).Obj())
	want := append(names("ev", "a", 20), "ev-b-0")
	jobs, _ := waitForChildren(t, timeout, ns, "ev", want)
	waitForEvent(t, ns, "ev", hyperjob.ReasonSyncedChildren, "created 21 Volcano Jobs")

	old := jobs["ev-b-0"].UID
	updateHyperJob(t, ns, "ev", func(hj *trainingv1alpha1.HyperJob) {
		hj.Spec.ReplicatedJobs[1].TemplateSpec.Tasks[0].Template = builders.PodTemplate("busybox:2", 0)
	})
	waitForEvent(t, ns, "ev", hyperjob.ReasonRecreatingJob, "the template of replicatedJob b changed: recreating its 1 unfinished children one at a time")
	waitFor(t, timeout, "ev-b-0 recreated", func(ctx context.Context) (bool, error) {
		jobs, _, err := children(ctx, ns, "ev")
		j := jobs["ev-b-0"]
		return err == nil && j != nil && j.UID != old && j.DeletionTimestamp == nil, err
	})
	for _, n := range want {
		setJobStatus(t, ns, n, batchv1alpha1.Completed, nil)
	}
	waitForEvent(t, ns, "ev", hyperjob.ReasonChildrenCompleted, "21 of 21 child jobs completed")

	evs, err := eventsFor(ctx, ns, "ev", hyperjob.ReasonSyncedChildren)
	require.NoError(t, err)
	t.Logf("%d SyncedChildren Events for 21 children, a rollout and completion", len(evs))
}

// A new PropagationPolicy is created, not force-applied: an object of the child's name that the
// controller's cache does not show (here: a cache that only sees labelled PropagationPolicies, as a
// lagging cache would) makes Create fail, and the object is left alone instead of being adopted.
func TestNewPropagationPolicyDoesNotAdoptAnUnseenObject(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-adopt", nil)
	foreign := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ad-a-0", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "mine"}}}}
	create(t, foreign)
	childrenOnly, err := labels.NewRequirement(hbv1.HyperJobNameLabel, selection.Exists, nil)
	require.NoError(t, err)
	startManagerWith(t, testConfig(), ns, func(o *ctrl.Options) {
		o.Cache.ByObject = map[client.Object]cache.ByObject{
			&policyv1alpha1.PropagationPolicy{}: {Label: labels.NewSelector().Add(*childrenOnly)},
		}
	})
	create(t, builders.MakeHyperJob(ns, "ad").ReplicatedJobs(replicatedJob("a", 1)).Obj())
	waitForEvent(t, ns, "ad", "ChildNameTaken", "PropagationPolicy ad-a-0 exists and is not controlled by this HyperJob")
	var got policyv1alpha1.PropagationPolicy
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &got))
	assert.Empty(t, got.OwnerReferences, "the foreign PropagationPolicy was adopted")
	assert.Empty(t, got.Labels, "the foreign PropagationPolicy was changed")
	assert.Equal(t, "mine", got.Spec.ResourceSelectors[0].Name)
	for _, m := range got.ManagedFields {
		assert.NotEqual(t, hyperjob.FieldOwner, m.Manager, "the controller wrote to the foreign PropagationPolicy")
	}
	jobs, _, err := children(ctx, ns, "ad")
	require.NoError(t, err)
	assert.Nil(t, jobs["ad-a-0"], "no Volcano Job without its own PropagationPolicy")
}

// Tenancy in depth: in a namespace no webhook guards, the controller creates no child in a queue, or
// on clusters, the namespace's WorkloadPolicy does not allow; fixing the spec lets it proceed.
func TestControllerEnforcesAllowedQueuesAndClusters(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-tenancy", map[string]string{"tenancy-test": "hj"})
	pol := builders.MakePolicy("hj-tenancy").Selector("tenancy-test", "hj").AllowedQueues("team-a").AllowedClusters("c1", "c2").Obj()
	create(t, pol)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	startManager(t, testConfig(), ns)

	withQueue := func(q string, clusters ...string) trainingv1alpha1.ReplicatedJob {
		rj := replicatedJob("a", 2, clusters...)
		rj.TemplateSpec.Queue = q
		return rj
	}
	create(t, builders.MakeHyperJob(ns, "q").ReplicatedJobs(withQueue("gpu", "c1")).Obj())
	c := waitForCondition(t, ns, "q", hyperjob.ConditionSpecInvalid, hyperjob.ReasonQueueNotAllowed)
	assert.Contains(t, c.Message, `queue "gpu" is not allowed in namespace "hj-tenancy": WorkloadPolicy "hj-tenancy" allows only "team-a"`)
	create(t, builders.MakeHyperJob(ns, "cl").ReplicatedJobs(withQueue("team-a", "c1", "c3")).Obj())
	c = waitForCondition(t, ns, "cl", hyperjob.ConditionSpecInvalid, hyperjob.ReasonClusterNotAllowed)
	assert.Contains(t, c.Message, `cluster "c3" is not allowed`)
	create(t, builders.MakeHyperJob(ns, "any").ReplicatedJobs(withQueue("team-a")).Obj())
	c = waitForCondition(t, ns, "any", hyperjob.ConditionSpecInvalid, hyperjob.ReasonClusterNotAllowed)
	assert.Contains(t, c.Message, "naming no clusters")
	for _, n := range []string{"q", "cl", "any"} {
		jobs, pps, err := children(ctx, ns, n)
		require.NoError(t, err)
		assert.Empty(t, jobs, n)
		assert.Empty(t, pps, n)
	}

	updateHyperJob(t, ns, "cl", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].ClusterNames = []string{"c2"} })
	jobs, _ := waitForChildren(t, timeout, ns, "cl", names("cl", "a", 2))
	assert.Equal(t, "team-a", jobs["cl-a-0"].Spec.Queue)
	waitFor(t, timeout, "SpecInvalid cleared", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "cl")
		return err == nil && apimeta.IsStatusConditionFalse(hj.Status.Conditions, hyperjob.ConditionSpecInvalid), err
	})
}
