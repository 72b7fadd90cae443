package hyperjob

import (
	"context"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/autosplit"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

func cluster(name string, ready bool) *clusterv1alpha1.Cluster {
	st := metav1.ConditionTrue
	if !ready {
		st = metav1.ConditionFalse
	}
	return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: st, Reason: "test", LastTransitionTime: metav1.Now()}},
			APIEnablements: []clusterv1alpha1.APIEnablement{{GroupVersion: "batch.volcano.sh/v1alpha1", Resources: []clusterv1alpha1.APIResource{{Name: "jobs", Kind: "Job"}}}}}}
}

// TestDecideLeavesOutMembersKarmadaWouldRefuse (issue 38, item 4): a Ready member that does not serve Volcano Jobs, or has
// a taint, is no candidate even where best fit would choose it; the decision, its Event and a
// refusal say why.
func TestDecideLeavesOutMembersKarmadaWouldRefuse(t *testing.T) {
	ctx := context.Background()
	leaf := func(name string, nodes ...string) autosplit.HyperNode {
		return autosplit.HyperNode{Name: name, Tier: 1, Members: nodes}
	}
	snaps := map[string]*memberSnapshot{
		"m1": {member: autosplit.Member{Name: "m1", Ready: true, Free: map[string]int64{"a": 8, "b": 8},
			HyperNodes: []autosplit.HyperNode{leaf("l-a", "a"), leaf("l-b", "b")}}, shown: map[types.NamespacedName]int{}},
		"m2": {member: autosplit.Member{Name: "m2", Ready: true, Free: map[string]int64{"x": 4, "y": 4},
			HyperNodes: []autosplit.HyperNode{leaf("l-x", "x", "y")}}, shown: map[types.NamespacedName]int{}},
	}
	reader := func(_ context.Context, c string, _ corev1.ResourceName) (*memberSnapshot, error) {
		return snaps[c], nil
	}
	noAPI := cluster("m2", true)
	noAPI.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "pods", Kind: "Pod"}}}}
	noAPI.Status.Conditions = append(noAPI.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionCompleteAPIEnablements,
		Status: metav1.ConditionTrue, Reason: "test", LastTransitionTime: metav1.Now()})
	hj := hyperJob(autoRJ("w", 1))
	hj.Spec.MaxDomains = ptr.To[int32](1)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cluster("m1", true), noAPI, hj).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: rec, auto: newAutoDecider(reader)}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
	p := plan(t, hj)
	out, err := r.decideAuto(ctx, hj, p.Auto)
	require.NoError(t, err)
	require.True(t, out.decided, out.waiting)
	got, err := readAutoRecord(hj)
	require.NoError(t, err)
	assert.Equal(t, "m1: 1 (hj-w-0 in l-a)", got.String(), "m2's leaf fits best, but m2 serves no Volcano Job")
	assert.Equal(t, "decided: m1: 1 (hj-w-0 in l-a); left out: m2 (serves no batch.volcano.sh/v1alpha1 Job: not in its Cluster's status.apiEnablements, so Karmada places no child there)", got.conditionMessage())
	assert.Contains(t, <-rec.Events, "left out: m2 (serves no batch.volcano.sh/v1alpha1 Job")

	// Incomplete apiEnablements count as not served (Karmada's filter reads them so); a taint
	// leaves a member out too; and when nothing is left, the refusal says why.
	unknown := cluster("m2", true)
	unknown.Status.APIEnablements = nil
	assert.Contains(t, memberLeftOut(unknown), "has not reported serving batch.volcano.sh/v1alpha1 Job")
	tainted := cluster("m1", true)
	tainted.Spec.Taints = []corev1.Taint{{Key: "maintenance", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	assert.Equal(t, "tainted maintenance=gpu:NoSchedule, which the children's PropagationPolicies do not tolerate", memberLeftOut(tainted))
	tainted.Spec.Taints[0].Effect = corev1.TaintEffectPreferNoSchedule
	assert.Empty(t, memberLeftOut(tainted))
	assert.Empty(t, memberLeftOut(cluster("m1", true)))

	other := hyperJob(autoRJ("w", 1, "m2"))
	other.Name, other.UID = "other", "uid-other"
	require.NoError(t, c.Create(ctx, other))
	p = plan(t, other)
	out, err = r.decideAuto(ctx, other, p.Auto)
	require.NoError(t, err)
	assert.Contains(t, out.waiting, "; left out: m2 (serves no batch.volcano.sh/v1alpha1 Job")
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

// TestDeletedHyperJobReservesNothing (issue 38, item 3): a HyperJob deleted right after its
// decision, before any other decision saw it, takes its reservation with it at once: the next
// HyperJob fits in the room it held. Its delete event empties the ledger as well.
func TestDeletedHyperJobReservesNothing(t *testing.T) {
	ctx := context.Background()
	snap := &memberSnapshot{member: autosplit.Member{Name: "m1", Ready: true, Free: map[string]int64{"a": 8, "b": 8, "c": 8},
		HyperNodes: []autosplit.HyperNode{{Name: "l-a", Tier: 1, Members: []string{"a"}}, {Name: "l-b", Tier: 1, Members: []string{"b"}}, {Name: "l-c", Tier: 1, Members: []string{"c"}}}},
		shown: map[types.NamespacedName]int{}}
	reader := func(context.Context, string, corev1.ResourceName) (*memberSnapshot, error) { return snap, nil }
	gone := hyperJob(autoRJ("w", 3))
	gone.Name, gone.UID = "gone", "uid-gone"
	next := hyperJob(autoRJ("w", 3))
	next.Name, next.UID = "next", "uid-next"
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cluster("m1", true), gone, next).Build()
	r := &Reconciler{client: c, recorder: record.NewFakeRecorder(10), auto: newAutoDecider(reader)}
	decide := func(hj *trainingv1alpha1.HyperJob) autoOutcome {
		t.Helper()
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
		p := plan(t, hj)
		require.NotNil(t, p.Auto)
		out, err := r.decideAuto(ctx, hj, p.Auto)
		require.NoError(t, err)
		return out
	}
	require.True(t, decide(gone).decided)
	require.Len(t, r.auto.ledger, 1)
	require.NoError(t, c.Delete(ctx, gone))
	out := decide(next)
	require.True(t, out.decided, "the deleted HyperJob still reserves: %s", out.waiting)

	// The delete event drops the decision without waiting for a listing.
	require.Contains(t, r.auto.ledger, next.UID)
	r.hyperJobGone(ctx, next)
	assert.NotContains(t, r.auto.ledger, next.UID)
}

// TestNoSplitFitsOnlyWhenNumbersChange (issue 38, item 9): the NoSplitFits Event repeats only when
// the refusal's numbers change; the condition written from the first refusal silences the same
// numbers.
func TestNoSplitFitsOnlyWhenNumbersChange(t *testing.T) {
	ctx := context.Background()
	snap := &memberSnapshot{member: autosplit.Member{Name: "m1", Ready: true, Free: map[string]int64{"a": 4},
		HyperNodes: []autosplit.HyperNode{{Name: "l-a", Tier: 1, Members: []string{"a"}}}}, shown: map[types.NamespacedName]int{}}
	hj := hyperJob(autoRJ("w", 1))
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(cluster("m1", true), hj).WithStatusSubresource(hj).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{client: c, recorder: rec, auto: newAutoDecider(func(context.Context, string, corev1.ResourceName) (*memberSnapshot, error) {
		return snap, nil
	})}
	refuse := func() {
		t.Helper()
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
		p := plan(t, hj)
		out, err := r.decideAuto(ctx, hj, p.Auto)
		require.NoError(t, err)
		require.NotEmpty(t, out.waiting)
		// The pass writes the condition, as syncHyperJobStatus does.
		p.AutoWaiting = out.waiting
		setAutoCondition(&hj.Status, hj.Generation, p)
		require.NoError(t, c.Status().Update(ctx, hj))
	}
	events := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	refuse()
	first := events()
	require.Len(t, first, 1)
	assert.Contains(t, first[0], "NoSplitFits waiting: ")
	refuse()
	refuse()
	assert.Empty(t, events(), "the same numbers again")
	snap.member.Free["a"] = 2
	refuse()
	again := events()
	require.Len(t, again, 1, "new numbers")
	assert.Contains(t, again[0], "m1: 2 free")
}

// TestKarmadaRefusedSplit (issue 38, item 4): a child's binding that Karmada's scheduler refused
// on its decided member for a reason that does not pass by itself takes the split back once, with
// the member left out; a refusal that passes by itself (Karmada's not-ready taint), or a verdict
// on another placement, does not.
func TestKarmadaRefusedSplit(t *testing.T) {
	rec := &autoRecord{Resource: gpu, Children: map[string]autoPlace{"hj-w-0": {Cluster: "m2", Pods: 2, PodDemand: 4}}}
	binding := func(clusters []string, msg string) map[string]*workv1alpha2.ResourceBinding {
		rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		rb.Spec.Placement = &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}}
		rb.Status.Conditions = []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse, Reason: workv1alpha2.BindingReasonNoClusterFit, Message: msg}}
		return map[string]*workv1alpha2.ResourceBinding{"hj-w-0": rb}
	}
	noAPI := "0/2 clusters are available: 1 cluster(s) did not have the API resource, 1 cluster(s) did not match the placement cluster affinity constraint."
	now := map[string]string{"m2": "serves no batch.volcano.sh/v1alpha1 Job"}
	leftOut := func(c string) string { return now[c] }
	assert.Equal(t, map[string]string{"m2": "Karmada refused child hj-w-0 there: " + noAPI}, lastingRefusals(rec, binding([]string{"m2"}, noAPI), leftOut))
	assert.Empty(t, lastingRefusals(rec, binding([]string{"m1"}, noAPI), leftOut), "a verdict on another placement")
	taint := "0/2 clusters are available: 1 cluster(s) had untolerated taint {maintenance=gpu:NoSchedule}, 1 cluster(s) did not match the placement cluster affinity constraint."
	assert.Len(t, lastingRefusals(rec, binding([]string{"m2"}, taint), leftOut), 1)
	assert.Empty(t, lastingRefusals(rec, binding([]string{"m2"}, "0/2 clusters are available: 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}, 1 cluster(s) did not match the placement cluster affinity constraint."), leftOut))
	delete(now, "m2")
	assert.Empty(t, lastingRefusals(rec, binding([]string{"m2"}, noAPI), leftOut), "an old verdict on a member that serves the kind now")
	now["m2"] = "serves no batch.volcano.sh/v1alpha1 Job"

	// The controller takes the split back once: the record keeps no child, m2 is left out, and the
	// plan built from it asks for a new decision without m2.
	ctx := context.Background()
	hj := hyperJob(autoRJ("w", 1))
	v, err := rec.encode()
	require.NoError(t, err)
	hj.Annotations = map[string]string{hbv1.AutoSplitAnnotation: v}
	rbs := binding([]string{"m2"}, noAPI)["hj-w-0"]
	rbs.Name, rbs.Namespace = "hj-w-0-job", hj.Namespace
	rbs.Spec.Resource = workv1alpha2.ObjectReference{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: "hj-w-0"}
	m2 := cluster("m2", true)
	m2.Status.APIEnablements = nil
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(hj, rbs, cluster("m1", true), m2).WithStatusSubresource(rbs).Build()
	events := record.NewFakeRecorder(10)
	r := &Reconciler{client: c, apiReader: c, recorder: events, auto: newAutoDecider(nil), gateDispatch: true}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
	p := plan(t, hj)
	require.NotNil(t, p.AutoDecided)
	taken, err := r.checkAutoRefused(ctx, hj, p)
	require.NoError(t, err)
	require.True(t, taken)
	assert.Contains(t, <-events.Events, "AutoSplitRefused m2: Karmada refused child hj-w-0 there: 0/2 clusters are available: 1 cluster(s) did not have the API resource")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(hj), hj))
	p = plan(t, hj)
	require.NotNil(t, p.Auto, "decided again")
	assert.True(t, p.Auto.Redecided)
	assert.Contains(t, p.Auto.LeftOut["m2"], "did not have the API resource")

	// Refused again after the second decision: reported, not taken back.
	rec.Redecided = true
	v, err = rec.encode()
	require.NoError(t, err)
	hj.Annotations[hbv1.AutoSplitAnnotation] = v
	require.NoError(t, c.Update(ctx, hj))
	p = plan(t, hj)
	taken, err = r.checkAutoRefused(ctx, hj, p)
	require.NoError(t, err)
	assert.False(t, taken)
	assert.Contains(t, p.AutoRefused, "it is decided again only once")
	assert.Contains(t, <-events.Events, "AutoSplitRefused the split decided again is refused too")
}
