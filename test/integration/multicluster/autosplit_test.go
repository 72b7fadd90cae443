package multicluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// autoSetup prepares one auto split test: its namespace on the plane and the HyperJob controller for
// the namespace. The members' HyperNode trees are the suite's (memberNodes): member1 has one leaf per
// node of 8 GPUs, member2 one leaf over its two nodes of 4.
func autoSetup(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns)
}

// autoHyperJob is a HyperJob in splitPolicy mode auto: one replicatedJob "w" of children children,
// each a Volcano Job of 2 pods × 4 GPUs (8 per child, splitPolicy.accelerators 8) that must stay
// inside one leaf (networkTopology hard, highestTierAllowed 1).
func autoHyperJob(ns, name string, children int32, maxDomains int32) *trainingv1alpha1.HyperJob {
	p := builders.PodTemplate("busybox:1", 4)
	p.Spec.SchedulerName = "volcano"
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	rj := builders.MakeReplicatedJob("w", children).Template(p).Obj()
	rj.TemplateSpec.Tasks[0].Replicas, rj.TemplateSpec.MinAvailable = 2, 2
	rj.TemplateSpec.SchedulerName = "volcano"
	rj.TemplateSpec.Queue = "default"
	rj.TemplateSpec.NetworkTopology = &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	rj.SplitPolicy = &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeAuto, Accelerators: ptr.To(8), AcceleratorType: ptr.To(string(membercluster.GPUResource))}
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(rj).Obj()
	hj.Spec.MaxDomains = ptr.To(maxDomains)
	return hj
}

// blocker is a pod bound to a member's node that holds gpus GPUs and keeps running (kwok runs pods
// that no Job owns until they are deleted): another tenant's workload.
func blocker(ctx context.Context, t *testing.T, member, node string, gpus int64) *corev1.Pod {
	t.Helper()
	c := members[member].Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blockers"}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "blocker-" + node},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{membercluster.GPUResource: q}, Limits: corev1.ResourceList{membercluster.GPUResource: q}}}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
	require.NoError(t, c.Create(ctx, pod))
	waitFor(ctx, t, "blocker "+pod.Name+" Running in "+member, func(ctx context.Context) (bool, string) {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	t.Cleanup(func() { removeBlocker(context.Background(), t, member, pod) })
	return pod
}

// removeBlocker deletes a blocker at once and waits until it is gone.
func removeBlocker(ctx context.Context, t *testing.T, member string, pod *corev1.Pod) {
	t.Helper()
	c := members[member].Client
	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); apierrors.IsNotFound(err) {
		return
	} else {
		require.NoError(t, err)
	}
	waitFor(ctx, t, "blocker "+pod.Name+" gone from "+member, func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// autoPlaces reads the recorded decision: child → "cluster/domain".
func autoPlaces(t *testing.T, hj *trainingv1alpha1.HyperJob) map[string]string {
	t.Helper()
	var rec struct {
		Children map[string]struct{ Cluster, Domain string } `json:"children"`
	}
	v, ok := hj.Annotations[hbv1.AutoSplitAnnotation]
	require.True(t, ok, "annotation %s", hbv1.AutoSplitAnnotation)
	require.NoError(t, json.Unmarshal([]byte(v), &rec))
	out := map[string]string{}
	for n, p := range rec.Children {
		out[n] = p.Cluster + "/" + p.Domain
	}
	return out
}

// waitAutoCondition waits for the HyperJob's AutoSplit condition with this status and returns the
// HyperJob.
func waitAutoCondition(ctx context.Context, t *testing.T, key client.ObjectKey, status metav1.ConditionStatus) *trainingv1alpha1.HyperJob {
	t.Helper()
	var hj trainingv1alpha1.HyperJob
	waitFor(ctx, t, fmt.Sprintf("%s: condition %s=%s", key.Name, hyperjob.ConditionAutoSplit, status), func(ctx context.Context) (bool, string) {
		if err := plane.Client.Get(ctx, key, &hj); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionAutoSplit)
		return c != nil && c.Status == status, describe(hj.Status.Conditions)
	})
	return &hj
}

// waitChildrenCompleted waits until every child of the decision is Completed in its cluster.
func waitChildrenCompleted(ctx context.Context, t *testing.T, ns string, places map[string]string) {
	t.Helper()
	for child, place := range places {
		m := strings.SplitN(place, "/", 2)[0]
		waitFor(ctx, t, fmt.Sprintf("child %s Completed in %s", child, m), func(ctx context.Context) (bool, string) {
			var j batchv1alpha1.Job
			if err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j); err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == batchv1alpha1.Completed, describe(j.Status.State)
		})
	}
}

// jobsIn lists the Volcano Jobs of ns in a member (or on the plane).
func jobsIn(ctx context.Context, t *testing.T, c client.Client, ns string) []string {
	t.Helper()
	var l batchv1alpha1.JobList
	require.NoError(t, c.List(ctx, &l, client.InNamespace(ns)))
	var out []string
	for _, j := range l.Items {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// TestAutoSplitPicksTheMemberWhoseLeafHoldsTheChild: member1 has 12 free GPUs, 4 on each of its
// three leaves (a blocker of 4 on every node); member2 has 8, all in its one leaf. A child of 2 pods
// × 4 GPUs that must stay in one leaf fits only member2, though member1 has more free GPUs in all:
// the decision, its condition and Event name member2 and its leaf, the child's PropagationPolicy
// names only member2, and the child runs there to Completed.
func TestAutoSplitPicksTheMemberWhoseLeafHoldsTheChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "auto-leaf"
	autoSetup(ctx, t, ns)
	for _, n := range []string{"m1-gpu-0", "m1-gpu-1", "m1-gpu-2"} {
		blocker(ctx, t, "member1", n, 4)
	}

	hj := autoHyperJob(ns, "leaf", 1, 2)
	require.NoError(t, plane.Client.Create(ctx, hj))
	got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(hj), metav1.ConditionTrue)
	assert.Equal(t, map[string]string{"leaf-w-0": "member2/m2-leaf-0"}, autoPlaces(t, got))
	c := apimeta.FindStatusCondition(got.Status.Conditions, hyperjob.ConditionAutoSplit)
	assert.Equal(t, hyperjob.ReasonAutoSplitDecided, c.Reason)
	assert.Equal(t, "decided: member2: 1 (leaf-w-0 in m2-leaf-0)", c.Message)
	evs, err := hyperJobEvents(ctx, ns, hj.Name, hyperjob.ReasonAutoSplitDecided)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "split 1 children over 1 member clusters: member2: 1 (leaf-w-0 in m2-leaf-0)", evs[0].Message)

	waitChildrenCompleted(ctx, t, ns, autoPlaces(t, got))
	var pp policyv1alpha1.PropagationPolicy
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leaf-w-0"}, &pp))
	require.NotNil(t, pp.Spec.Placement.ClusterAffinity)
	assert.Equal(t, []string{"member2"}, pp.Spec.Placement.ClusterAffinity.ClusterNames)
	assert.Empty(t, jobsIn(ctx, t, members["member1"].Client, ns), "member1 never gets the child")
	t.Logf("member1 free 12 (4 per leaf), member2 free 8 (one leaf): %s", c.Message)
}

// TestAutoSplitAcrossMembersOnlyWhenNeeded: with every GPU free (member1: 3 leaves of 8, member2: 1
// leaf of 2 × 4), a HyperJob of 4 children of 8 GPUs (32: more than either member has) is split
// over both, 3 + 1; then one of 3 children (24) stays in member1 alone, though member2 could take
// one of them. Every child runs to Completed in its decided member.
func TestAutoSplitAcrossMembersOnlyWhenNeeded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "auto-across"
	autoSetup(ctx, t, ns)

	big := autoHyperJob(ns, "big", 4, 2)
	require.NoError(t, plane.Client.Create(ctx, big))
	got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(big), metav1.ConditionTrue)
	places := autoPlaces(t, got)
	perCluster := map[string]int{}
	for _, p := range places {
		perCluster[strings.SplitN(p, "/", 2)[0]]++
	}
	assert.Equal(t, map[string]int{"member1": 3, "member2": 1}, perCluster, "split over both: %v", places)
	assert.Equal(t, "member2/m2-leaf-0", places["big-w-3"], "member2's child in its only leaf")
	waitChildrenCompleted(ctx, t, ns, places)
	waitFor(ctx, t, "big Completed on the plane", func(ctx context.Context) (bool, string) {
		var h trainingv1alpha1.HyperJob
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(big), &h); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(h.Status.Conditions, hyperjob.ConditionCompleted), describe(h.Status.Conditions)
	})

	small := autoHyperJob(ns, "small", 3, 2)
	require.NoError(t, plane.Client.Create(ctx, small))
	got = waitAutoCondition(ctx, t, client.ObjectKeyFromObject(small), metav1.ConditionTrue)
	places = autoPlaces(t, got)
	assert.Equal(t, map[string]string{"small-w-0": "member1/m1-leaf-0", "small-w-1": "member1/m1-leaf-1", "small-w-2": "member1/m1-leaf-2"}, places)
	waitChildrenCompleted(ctx, t, ns, places)
	assert.NotContains(t, jobsIn(ctx, t, members["member2"].Client, ns), "small-w-0", "member2 gets none of small's children")
}

// TestAutoSplitWaitsUntilABlockerGoes: a blocker of 4 GPUs on one of member1's nodes leaves member1
// room for 2 children of 8 and member2 for 1; a HyperJob of 3 children with maxDomains 1 fits
// nowhere. It creates nothing, says why with the numbers (condition and Event), and is decided and
// runs in member1 once the blocker is deleted (the Cluster's status change brings the next
// decision).
func TestAutoSplitWaitsUntilABlockerGoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "auto-wait"
	autoSetup(ctx, t, ns)
	b := blocker(ctx, t, "member1", "m1-gpu-0", 4)

	hj := autoHyperJob(ns, "wait", 3, 1)
	require.NoError(t, plane.Client.Create(ctx, hj))
	got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(hj), metav1.ConditionFalse)
	c := apimeta.FindStatusCondition(got.Status.Conditions, hyperjob.ConditionAutoSplit)
	assert.Equal(t, hyperjob.ReasonNoSplitFits, c.Reason)
	for _, want := range []string{
		"no set of at most 1 member clusters holds all 3 children",
		"w: 3 children of 2 pods × 4 accelerators, each inside one tier-1 HyperNode",
		"member1: 20 free, w: 3 domains, the largest holds 2 of its pods, 2 children in all",
		"member2: 8 free, w: 1 domains, the largest holds 2 of its pods, 1 children in all",
	} {
		assert.Contains(t, c.Message, want)
	}
	evs, err := hyperJobEvents(ctx, ns, hj.Name, hyperjob.ReasonNoSplitFits)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	assert.Contains(t, evs[0].Message, "member1: 20 free")
	// The condition is the positive signal that the controller looked: nothing was created.
	assert.Empty(t, jobsIn(ctx, t, plane.Client, ns), "no child on the plane")
	var pps policyv1alpha1.PropagationPolicyList
	require.NoError(t, plane.Client.List(ctx, &pps, client.InNamespace(ns)))
	assert.Empty(t, pps.Items, "no PropagationPolicy")
	_, annotated := got.Annotations[hbv1.AutoSplitAnnotation]
	assert.False(t, annotated, "no decision recorded")
	t.Logf("refused: %s", c.Message)

	removed := time.Now()
	removeBlocker(ctx, t, "member1", b)
	got = waitAutoCondition(ctx, t, client.ObjectKeyFromObject(hj), metav1.ConditionTrue)
	t.Logf("decided %s after the blocker's deletion", time.Since(removed).Round(100*time.Millisecond))
	places := autoPlaces(t, got)
	for child, p := range places {
		assert.True(t, strings.HasPrefix(p, "member1/"), "%s in member1: %s", child, p)
	}
	assert.Len(t, places, 3)
	waitChildrenCompleted(ctx, t, ns, places)
}

// TestTwoAutoHyperJobsAtOnce: two HyperJobs of 3 children each with maxDomains 1 are created at
// the same moment; each fits member1 alone, not both together (member2 holds one child). Exactly
// one is decided; the other waits with the numbers, creating nothing, until the first one's pods
// have finished in member1; then it is decided and runs. No child of the second exists in any
// member while a pod of the first still holds GPUs there, so member1 is never over-committed.
func TestTwoAutoHyperJobsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "auto-two"
	autoSetup(ctx, t, ns)
	tl := &timeline{ns: ns}
	tl.watch(ctx, t, "plane", plane.Config, &batchv1alpha1.JobList{})
	tl.watch(ctx, t, "member1", members["member1"].Config, &corev1.PodList{})

	a, b := autoHyperJob(ns, "one", 3, 1), autoHyperJob(ns, "two", 3, 1)
	var wg sync.WaitGroup
	for _, hj := range []*trainingv1alpha1.HyperJob{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, plane.Client.Create(ctx, hj))
		}()
	}
	wg.Wait()

	// Positive signal: both have an AutoSplit condition, one True, one False.
	var first, second *trainingv1alpha1.HyperJob
	waitFor(ctx, t, "one decided, the other waiting", func(ctx context.Context) (bool, string) {
		var hs [2]trainingv1alpha1.HyperJob
		var st []string
		for i, hj := range []*trainingv1alpha1.HyperJob{a, b} {
			if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &hs[i]); err != nil {
				return false, err.Error()
			}
			st = append(st, describe(apimeta.FindStatusCondition(hs[i].Status.Conditions, hyperjob.ConditionAutoSplit)))
		}
		ca := apimeta.FindStatusCondition(hs[0].Status.Conditions, hyperjob.ConditionAutoSplit)
		cb := apimeta.FindStatusCondition(hs[1].Status.Conditions, hyperjob.ConditionAutoSplit)
		if ca == nil || cb == nil || ca.Status == cb.Status {
			return false, strings.Join(st, " | ")
		}
		if ca.Status == metav1.ConditionTrue {
			first, second = &hs[0], &hs[1]
		} else {
			first, second = &hs[1], &hs[0]
		}
		return true, ""
	})
	c := apimeta.FindStatusCondition(second.Status.Conditions, hyperjob.ConditionAutoSplit)
	assert.Equal(t, hyperjob.ReasonNoSplitFits, c.Reason)
	assert.Contains(t, c.Message, "no set of at most 1 member clusters holds all 3 children")
	_, annotated := second.Annotations[hbv1.AutoSplitAnnotation]
	assert.False(t, annotated, "%s: no decision recorded while it waits", second.Name)
	for _, j := range jobsIn(ctx, t, plane.Client, ns) {
		assert.True(t, strings.HasPrefix(j, first.Name+"-"), "only %s has children while %s waits: %s", first.Name, second.Name, j)
	}
	t.Logf("%s decided, %s waiting: %s", first.Name, second.Name, c.Message)

	// The second one is decided once room appears, and both complete.
	got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(second), metav1.ConditionTrue)
	waitChildrenCompleted(ctx, t, ns, autoPlaces(t, first))
	waitChildrenCompleted(ctx, t, ns, autoPlaces(t, got))

	// No over-commit, from member1's pod timeline: every pod of the second HyperJob's children was
	// created after every pod of the first one had finished.
	ev := tl.snapshot()
	lastFirstRunning, firstSecond := -1, -1
	for i, e := range ev {
		if e.src != "member1" || e.kind != "Pod" {
			continue
		}
		switch {
		case strings.HasPrefix(e.name, first.Name+"-") && e.podPhase != corev1.PodSucceeded:
			lastFirstRunning = i
		case strings.HasPrefix(e.name, second.Name+"-") && firstSecond < 0:
			firstSecond = i
		}
	}
	require.GreaterOrEqual(t, firstSecond, 0, "the second HyperJob's pods ran in member1:\n%s", tl)
	assert.Less(t, lastFirstRunning, firstSecond, "no pod of %s before every pod of %s finished:\n%s", second.Name, first.Name, tl)
}
