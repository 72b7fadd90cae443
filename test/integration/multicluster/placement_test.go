package multicluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// hyperbatchScheduler is the members' hyperbatch-scheduler (docs/scheduler.md).
const hyperbatchScheduler = "hyperbatch-scheduler"

// kwokHold keeps kwok from completing a pod (the members' kwok leaves pods with this annotation out
// of its pod-complete stage: localproc.WriteKwokConfig), so a child stays Running.
var kwokHold = map[string]string{localproc.KwokHoldAnnotation: "true"}

// leafReplicatedJob is a replicatedJob of replicas children of pods pods × gpus GPUs each, for
// clusters, scheduled by hyperbatch-scheduler with every child inside one tier-1 HyperNode.
func leafReplicatedJob(name string, replicas, pods int32, gpus int64, annotations map[string]string, clusters ...string) trainingv1alpha1.ReplicatedJob {
	p := builders.PodTemplate("busybox:1", gpus)
	p.Spec.SchedulerName = hyperbatchScheduler
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Annotations = annotations
	rj := builders.MakeReplicatedJob(name, replicas).Clusters(clusters...).Template(p).Obj()
	rj.TemplateSpec.Tasks[0].Replicas, rj.TemplateSpec.MinAvailable = pods, pods
	rj.TemplateSpec.SchedulerName = hyperbatchScheduler
	rj.TemplateSpec.Queue = "default"
	rj.TemplateSpec.NetworkTopology = &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}
	return rj
}

// leafOf maps each member node to its tier-1 HyperNode.
func leafOf(member string) map[string]string {
	out := map[string]string{}
	for _, n := range memberNodes[member] {
		out[n.Name] = n.Leaf
	}
	return out
}

// childPlacement reads a child's pods in its member: the leaves their nodes hang off, and whether
// hyperbatch-scheduler bound every one (schedulerName, and a Scheduled Event it reported). done is
// false while a pod is missing or unbound.
func childPlacement(ctx context.Context, member, ns, child string, pods int) (leaves []string, done bool, state string) {
	c := members[member].Client
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: child}); err != nil {
		return nil, false, err.Error()
	}
	var evs corev1.EventList
	if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return nil, false, err.Error()
	}
	scheduledBy := map[string]string{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Pod" && e.Reason == "Scheduled" {
			scheduledBy[e.InvolvedObject.Name] = e.ReportingController + e.Source.Component
		}
	}
	set := map[string]bool{}
	var desc []string
	for _, p := range list.Items {
		desc = append(desc, fmt.Sprintf("%s@%s by %q (%s)", p.Name, p.Spec.NodeName, scheduledBy[p.Name], p.Spec.SchedulerName))
		if p.Spec.NodeName == "" || !strings.Contains(scheduledBy[p.Name], hyperbatchScheduler) || p.Spec.SchedulerName != hyperbatchScheduler {
			return nil, false, strings.Join(desc, ", ")
		}
		set[leafOf(member)[p.Spec.NodeName]] = true
	}
	for l := range set {
		leaves = append(leaves, l)
	}
	sort.Strings(leaves)
	return leaves, len(list.Items) == pods, strings.Join(desc, ", ")
}

// TestStaticSplitPlacedInOneHyperNode: the static split of TestHyperJobAcrossMembers (a ×2 for
// member1, b ×1 for member2, maxDomains 2), now with hyperbatch-scheduler in the members and every
// child limited to one tier-1 HyperNode (networkTopology hard, highestTierAllowed 1). Each child's
// pods are bound by hyperbatch-scheduler (their Scheduled Events say so) to nodes of a single leaf of
// its member, the children complete, the HyperJob is Completed on the plane with a state per child,
// and deleting it removes every child from both members within 60 s.
func TestStaticSplitPlacedInOneHyperNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, name = "placed", "hp"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns)

	// a: 2 children of 2 pods × 4 GPUs (member1: leaves of 16 and 8 GPUs); b: 1 child of 2 pods × 4
	// GPUs (member2: one leaf of 2 nodes × 4).
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(
		leafReplicatedJob("a", 2, 2, 4, nil, "member1"),
		leafReplicatedJob("b", 1, 2, 4, nil, "member2"),
	).Obj()
	hj.Spec.MaxDomains = ptr.To[int32](2)
	created := time.Now()
	require.NoError(t, plane.Client.Create(ctx, hj))

	want := map[string]string{"hp-a-0": "member1", "hp-a-1": "member1", "hp-b-0": "member2"}
	placed := map[string][]string{}
	for child, m := range want {
		waitFor(ctx, t, fmt.Sprintf("child %s bound by hyperbatch-scheduler in %s", child, m), func(ctx context.Context) (bool, string) {
			leaves, done, state := childPlacement(ctx, m, ns, child, 2)
			placed[child] = leaves
			return done, state
		})
		waitFor(ctx, t, fmt.Sprintf("child %s Completed in %s", child, m), func(ctx context.Context) (bool, string) {
			var j batchv1alpha1.Job
			if err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j); err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == batchv1alpha1.Completed, describe(j.Status)
		})
	}
	for child, m := range want {
		require.Len(t, placed[child], 1, "child %s's pods in %s sit under one leaf HyperNode, got %v", child, m, placed[child])
		t.Logf("child %s: both pods in %s under HyperNode %s, bound by hyperbatch-scheduler", child, m, placed[child][0])
	}

	t.Logf("children completed in their members %s after the HyperJob's creation", time.Since(created).Round(100*time.Millisecond))
	hyperJobCondition(ctx, t, hj, hyperjob.ConditionCompleted, metav1.ConditionTrue)
	var got trainingv1alpha1.HyperJob
	require.NoError(t, plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &got))
	t.Logf("HyperJob Completed on the plane %s after its creation", time.Since(created).Round(100*time.Millisecond))
	states := map[string]batchv1alpha1.JobPhase{}
	for _, s := range got.Status.ReplicatedJobsStatus {
		for c, st := range s.JobStates {
			states[c] = st.Phase
		}
	}
	assert.Equal(t, map[string]batchv1alpha1.JobPhase{"hp-a-0": batchv1alpha1.Completed, "hp-a-1": batchv1alpha1.Completed, "hp-b-0": batchv1alpha1.Completed}, states,
		"one Completed state per child on the plane")

	deleteAndWaitGone(ctx, t, hj, want)
}

// childCleanupLimit is how long deleting a HyperJob may take to remove every child from every member.
const childCleanupLimit = 60 * time.Second

// deleteAndWaitGone deletes the HyperJob on the plane and waits until no child (name → member) is
// left in its member, within childCleanupLimit.
func deleteAndWaitGone(ctx context.Context, t *testing.T, hj *trainingv1alpha1.HyperJob, children map[string]string) {
	limit := childCleanupLimit
	t.Helper()
	require.NoError(t, plane.Client.Delete(ctx, hj, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	deleted := time.Now()
	gctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	waitFor(gctx, t, fmt.Sprintf("every child of %s gone from the members within %s", hj.Name, limit), func(ctx context.Context) (bool, string) {
		var left []string
		for child, m := range children {
			err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: hj.Namespace, Name: child}, &batchv1alpha1.Job{})
			if !apierrors.IsNotFound(err) {
				left = append(left, m+"/"+child+": "+errString(err))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	t.Logf("every child of %s gone from its member %s after the HyperJob's deletion", hj.Name, time.Since(deleted).Round(100*time.Millisecond))
}
