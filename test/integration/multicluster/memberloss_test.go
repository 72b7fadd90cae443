package multicluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// clusterReadyIs waits until Karmada reports the Cluster's Ready condition as want (True or not).
func clusterReadyIs(ctx context.Context, t *testing.T, name string, want bool) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("Cluster %s Ready=%v", name, want), func(ctx context.Context) (bool, string) {
		var c clusterv1alpha1.Cluster
		if err := plane.Client.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
			return false, err.Error()
		}
		cond := apimeta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		if cond == nil {
			return false, "no Ready condition"
		}
		return (cond.Status == metav1.ConditionTrue) == want, fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	})
}

// hyperJobCondition waits until the HyperJob's condition typ has status want and returns it.
func hyperJobCondition(ctx context.Context, t *testing.T, hj *trainingv1alpha1.HyperJob, typ string, want metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	waitFor(ctx, t, fmt.Sprintf("HyperJob %s: %s=%s", hj.Name, typ, want), func(ctx context.Context) (bool, string) {
		var cur trainingv1alpha1.HyperJob
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(cur.Status.Conditions, typ)
		if c == nil {
			return false, describe(cur.Status.Conditions)
		}
		got = *c
		return c.Status == want, describe(c)
	})
	return got
}

// bindingClusters is the clusters Karmada's scheduler gave a child's ResourceBinding.
func bindingClusters(ctx context.Context, ns, child string) ([]string, error) {
	var rb workv1alpha2.ResourceBinding
	if err := plane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child + "-job"}, &rb); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range rb.Spec.Clusters {
		out = append(out, c.Name)
	}
	return out, nil
}

// TestMemberLoss: member2's kube-apiserver stops. Karmada marks the Cluster not Ready; the HyperJob
// whose child runs there reports it (MemberClusterLost True naming member2 and the child, a Warning
// Event); a new HyperJob whose children may go to either member is placed on member1 only and
// completes (Completed on the plane too); an auto split that member2 fits best is decided over
// member1 only and runs there. member2's kube-apiserver starts again: the Cluster is Ready, the
// condition clears, a HyperJob for member2 runs there to Completed, and the next auto split picks
// member2 again. Deleting the HyperJobs removes every child from every member within 60 s. Runs in
// parallel with TestNoFightForTwoMinutes (which uses member1 only).
func TestMemberLoss(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const ns = "loss"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns)
	oneGPU := func(hjName, rj string, replicas int32, hold map[string]string, clusters ...string) *trainingv1alpha1.HyperJob {
		return builders.MakeHyperJob(ns, hjName).ReplicatedJobs(leafReplicatedJob(rj, replicas, 1, 1, hold, clusters...)).Obj()
	}
	// An auto split of one child of 1 pod × 1 GPU, in one member: both members hold it, and best fit
	// picks member2 (fewer free GPUs) while it is Ready.
	autoOne := func(hjName string) *trainingv1alpha1.HyperJob {
		rj := leafReplicatedJob("w", 1, 1, 1, nil)
		rj.SplitPolicy = &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeAuto, Accelerators: ptr.To(1), AcceleratorType: ptr.To(string(membercluster.GPUResource))}
		hj := builders.MakeHyperJob(ns, hjName).ReplicatedJobs(rj).Obj()
		hj.Spec.MaxDomains = ptr.To[int32](1)
		return hj
	}
	autoDecidedFor := func(hj *trainingv1alpha1.HyperJob, member string) {
		t.Helper()
		begin := time.Now()
		defer func() {
			t.Logf("auto split of %s decided and its child Completed in %s", hj.Name, time.Since(begin).Round(100*time.Millisecond))
		}()
		got := waitAutoCondition(ctx, t, client.ObjectKeyFromObject(hj), metav1.ConditionTrue)
		places := autoPlaces(t, got)
		require.Len(t, places, 1, "one child decided")
		for child, place := range places {
			assert.True(t, strings.HasPrefix(place, member+"/"), "auto split of %s: child %s decided for %s, want %s", hj.Name, child, place, member)
		}
		t.Logf("auto split of %s: %s", hj.Name, apimeta.FindStatusCondition(got.Status.Conditions, hyperjob.ConditionAutoSplit).Message)
		waitChildrenCompleted(ctx, t, ns, places)
		// And Completed on the plane: Karmada has reflected the member's status through the child's
		// Work. Deleting a HyperJob about a second after Karmada created its child in the member (before
		// that round trip) once left the member's child behind in CI (Karmada's binding clean-up did not
		// reach a Work that new; docs/multicluster.md, "Found").
		hyperJobCondition(ctx, t, hj, hyperjob.ConditionCompleted, metav1.ConditionTrue)
	}
	childIn := func(member, child string, phase batchv1alpha1.JobPhase) {
		t.Helper()
		waitFor(ctx, t, fmt.Sprintf("child %s %s in %s", child, phase, member), func(ctx context.Context) (bool, string) {
			var j batchv1alpha1.Job
			if err := members[member].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j); err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == phase, describe(j.Status.State)
		})
	}

	// A HyperJob whose one child runs (held by kwok) in member2.
	before := oneGPU("before", "x", 1, kwokHold, "member2")
	require.NoError(t, plane.Client.Create(ctx, before))
	childIn("member2", "before-x-0", batchv1alpha1.Running)

	// member2 is lost.
	require.NoError(t, members["member2"].StopAPIServer())
	lostAt := time.Now()
	restarted := false
	defer func() {
		if !restarted {
			_ = members["member2"].RestartAPIServer(context.Background())
		}
	}()
	clusterReadyIs(ctx, t, "member2", false)
	t.Logf("Karmada reports member2 not Ready %s after its apiserver stopped", time.Since(lostAt).Round(100*time.Millisecond))
	lost := hyperJobCondition(ctx, t, before, hyperjob.ConditionMemberClusterLost, metav1.ConditionTrue)
	assert.Equal(t, hyperjob.ReasonMemberNotReady, lost.Reason)
	assert.Contains(t, lost.Message, "member2 (before-x-0)", "the condition names the member and the child")
	waitFor(ctx, t, "a Warning Event naming member2 on the HyperJob", func(ctx context.Context) (bool, string) {
		evs, err := hyperJobEvents(ctx, ns, "before", hyperjob.ReasonMemberNotReady)
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0 && strings.Contains(evs[0].Message, "member2") && evs[0].Type == corev1.EventTypeWarning, describe(evs)
	})
	t.Logf("HyperJob before: %s", lost.Message)

	// New work goes to member1 only, though either member is allowed.
	during := oneGPU("during", "y", 2, nil, "member1", "member2")
	require.NoError(t, plane.Client.Create(ctx, during))
	for _, child := range []string{"during-y-0", "during-y-1"} {
		waitFor(ctx, t, "child "+child+" scheduled by Karmada", func(ctx context.Context) (bool, string) {
			cs, err := bindingClusters(ctx, ns, child)
			if err != nil {
				return false, err.Error()
			}
			return len(cs) > 0, describe(cs)
		})
		cs, err := bindingClusters(ctx, ns, child)
		require.NoError(t, err)
		assert.Equal(t, []string{"member1"}, cs, "child %s placed on the Ready member only", child)
		childIn("member1", child, batchv1alpha1.Completed)
	}
	hyperJobCondition(ctx, t, during, hyperjob.ConditionCompleted, metav1.ConditionTrue)
	// The auto split decides over the Ready member only: member1, though member2 fits it better.
	autoDuring := autoOne("auto-during")
	require.NoError(t, plane.Client.Create(ctx, autoDuring))
	autoDecidedFor(autoDuring, "member1")

	// member2 comes back.
	require.NoError(t, members["member2"].RestartAPIServer(ctx))
	restarted = true
	back := time.Now()
	clusterReadyIs(ctx, t, "member2", true)
	t.Logf("member2 Ready again %s after its apiserver restarted", time.Since(back).Round(100*time.Millisecond))
	cleared := hyperJobCondition(ctx, t, before, hyperjob.ConditionMemberClusterLost, metav1.ConditionFalse)
	assert.Equal(t, hyperjob.ReasonMembersReady, cleared.Reason)
	childIn("member2", "before-x-0", batchv1alpha1.Running)

	// A new HyperJob for member2: Karmada places its child there again, and the member's Volcano
	// runs it (a Job created after the apiserver's restart; docs/multicluster.md, "A member lost").
	after := oneGPU("after", "z", 1, nil, "member2")
	require.NoError(t, plane.Client.Create(ctx, after))
	childIn("member2", "after-z-0", batchv1alpha1.Completed)
	cs, err := bindingClusters(ctx, ns, "after-z-0")
	require.NoError(t, err)
	assert.Equal(t, []string{"member2"}, cs)
	t.Logf("member2 ran a new child to Completed %s after its apiserver restarted", time.Since(back).Round(100*time.Millisecond))

	// Back to best fit over both members: member2.
	autoAfter := autoOne("auto-after")
	require.NoError(t, plane.Client.Create(ctx, autoAfter))
	autoDecidedFor(autoAfter, "member2")

	deleteAndWaitGone(ctx, t, before, map[string]string{"before-x-0": "member2"})
	deleteAndWaitGone(ctx, t, autoDuring, map[string]string{"auto-during-w-0": "member1"})
	deleteAndWaitGone(ctx, t, autoAfter, map[string]string{"auto-after-w-0": "member2"})
	deleteAndWaitGone(ctx, t, during, map[string]string{"during-y-0": "member1", "during-y-1": "member1"})
	deleteAndWaitGone(ctx, t, after, map[string]string{"after-z-0": "member2"})
}
