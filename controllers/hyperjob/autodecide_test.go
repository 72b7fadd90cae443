package hyperjob

import (
	"context"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/autosplit"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

func cluster(name string, ready bool) *clusterv1alpha1.Cluster {
	st := metav1.ConditionTrue
	if !ready {
		st = metav1.ConditionFalse
	}
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: st, Reason: "test", LastTransitionTime: metav1.Now()}}}}
}

// TestDecideAuto: the decider against a fake plane (Clusters, HyperJobs) and members given as
// snapshots. A NotReady member gets nothing, even when it is the only one with room; a decision is
// recorded on the HyperJob and reserves its children for the next decision until the member's pods
// show them; a refusal names the numbers and records nothing.
func TestDecideAuto(t *testing.T) {
	ctx := context.Background()
	leaf := func(name string, nodes ...string) autosplit.HyperNode {
		return autosplit.HyperNode{Name: name, Tier: 1, Members: nodes}
	}
	snaps := map[string]*memberSnapshot{
		"m1": {member: autosplit.Member{Name: "m1", Ready: true, Free: map[string]int64{"a": 8, "b": 8, "c": 8},
			HyperNodes: []autosplit.HyperNode{leaf("l-a", "a"), leaf("l-b", "b"), leaf("l-c", "c")}}, shown: map[types.NamespacedName]int{}},
		"m2": {member: autosplit.Member{Name: "m2", Ready: true, Free: map[string]int64{"x": 8, "y": 8, "z": 8, "w": 8},
			HyperNodes: []autosplit.HyperNode{leaf("l-x", "x", "y", "z", "w")}}, shown: map[types.NamespacedName]int{}},
	}
	reads := map[string]int{}
	reader := func(_ context.Context, c string, _ corev1.ResourceName) (*memberSnapshot, error) {
		reads[c]++
		return snaps[c], nil
	}
	first := hyperJob(autoRJ("w", 3))
	first.Name, first.UID = "first", "uid-first"
	second := hyperJob(autoRJ("w", 3))
	second.Name, second.UID = "second", "uid-second"
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(cluster("m1", true), cluster("m2", false), first, second).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: rec, auto: newAutoDecider(reader)}
	// Every decision reads the members afresh, except where the test says otherwise.
	clock := time.Now()
	r.auto.now = func() time.Time {
		clock = clock.Add(snapshotTTL)
		return clock
	}

	decide := func(hj *trainingv1alpha1.HyperJob) autoOutcome {
		t.Helper()
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
		p := plan(t, hj)
		require.NotNil(t, p.Auto)
		out, err := r.decideAuto(ctx, hj, p.Auto)
		require.NoError(t, err)
		return out
	}
	// m2 (NotReady) could hold all 3 in its one leaf; it is not even read.
	out := decide(first)
	require.True(t, out.decided)
	assert.Zero(t, reads["m2"], "a NotReady member is not read")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(first), first))
	got, err := readAutoRecord(first)
	require.NoError(t, err)
	assert.Equal(t, "m1: 3 (first-w-0 in l-a; first-w-1 in l-b; first-w-2 in l-c)", got.String())
	assert.Contains(t, <-rec.Events, "AutoSplitDecided split 3 children over 1 member clusters: m1: 3")

	// The second, decided before m1 shows any pod of the first: refused, with the reservation.
	out = decide(second)
	assert.False(t, out.decided)
	assert.Contains(t, out.waiting, "m1: 24 free, w: 3 domains, the largest holds 2 of its pods, 3 children in all (before 24 accelerators reserved for decided splits)")
	assert.Contains(t, out.waiting, "not Ready, not considered: m2")
	assert.Contains(t, <-rec.Events, "NoSplitFits waiting: no set of at most 1 member clusters holds all 3 children")

	// m1 shows the first's pods (bound, holding their GPUs): no reservation, still no room.
	for i, n := range []string{"a", "b", "c"} {
		snaps["m1"].member.Free[n] = 0
		snaps["m1"].shown[types.NamespacedName{Namespace: "ns", Name: []string{"first-w-0", "first-w-1", "first-w-2"}[i]}] = 2
	}
	out = decide(second)
	assert.Contains(t, out.waiting, "m1: 0 free")
	assert.NotContains(t, out.waiting, "reserved")

	// Their pods finish and m2 becomes Ready: both hold all three alone; m1 is chosen (it is left
	// with 0 free, m2 would keep 8: best fit).
	for _, n := range []string{"a", "b", "c"} {
		snaps["m1"].member.Free[n] = 8
	}
	var m2 clusterv1alpha1.Cluster
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "m2"}, &m2))
	m2.Status = cluster("m2", true).Status
	require.NoError(t, c.Update(ctx, &m2))
	out = decide(second)
	require.True(t, out.decided, out.waiting)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(second), second))
	got, err = readAutoRecord(second)
	require.NoError(t, err)
	assert.Equal(t, "m1: 3 (second-w-0 in l-a; second-w-1 in l-b; second-w-2 in l-c)", got.String())
}

// TestSnapshotReuse: within snapshotTTL a member is read once; after it, again; a failed read is
// not kept.
func TestSnapshotReuse(t *testing.T) {
	reads := 0
	fail := false
	d := newAutoDecider(func(context.Context, string, corev1.ResourceName) (*memberSnapshot, error) {
		reads++
		if fail {
			return nil, assert.AnError
		}
		return &memberSnapshot{}, nil
	})
	now := time.Unix(0, 0)
	d.now = func() time.Time { return now }
	ctx := context.Background()
	for range 3 {
		_, err := d.snapshot(ctx, "m1", gpu)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, reads)
	now = now.Add(snapshotTTL)
	fail = true
	_, err := d.snapshot(ctx, "m1", gpu)
	require.Error(t, err)
	fail = false
	_, err = d.snapshot(ctx, "m1", gpu)
	require.NoError(t, err)
	assert.Equal(t, 3, reads, "expired, then a failed read is not kept")
	d.forget("m1")
	_, err = d.snapshot(ctx, "m1", gpu)
	require.NoError(t, err)
	assert.Equal(t, 4, reads, "a changed Cluster is read again")
}
