package podgroupneighbours

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// exampleObjects reads every object of a multi-document file of examples/subgroups, the namespaced
// ones put in ns.
func exampleObjects(t *testing.T, file, ns string) []*unstructured.Unstructured {
	t.Helper()
	out := framework.ReadObjects(t, filepath.Join(framework.RepoRoot(), "examples", "subgroups", file))
	for _, u := range out {
		u.SetNamespace(ns)
	}
	return out
}

// pinToFabric gives the runtime's pod template the test fabric's node selector and toleration, so
// its pods land on the test's nodes and no other test's pods take their room.
func pinToFabric(t *testing.T, runtime *unstructured.Unstructured, prefix string) {
	t.Helper()
	rjs, _, err := unstructured.NestedSlice(runtime.Object, "spec", "template", "spec", "replicatedJobs")
	require.NoError(t, err)
	for i := range rjs {
		rj := rjs[i].(map[string]any)
		require.NoError(t, unstructured.SetNestedField(rj, map[string]any{"hb-test": prefix}, "template", "spec", "template", "spec", "nodeSelector"))
		require.NoError(t, unstructured.SetNestedSlice(rj, []any{map[string]any{"key": "hb-test", "operator": "Equal", "value": prefix, "effect": "NoSchedule"}},
			"template", "spec", "template", "spec", "tolerations"))
	}
	require.NoError(t, unstructured.SetNestedSlice(runtime.Object, rjs, "spec", "template", "spec", "replicatedJobs"))
}

// trainJobEvent waits for an Event on the TrainJob with the reason and every fragment in its message.
func trainJobEvent(t *testing.T, ns, name, reason string, fragments ...string) {
	t.Helper()
	framework.Eventually(t, wait, fmt.Sprintf("a %s Event on TrainJob %s with %q", reason, name, fragments), func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "TrainJob" || e.InvolvedObject.Name != name || e.Reason != reason {
				continue
			}
			all := true
			for _, f := range fragments {
				all = all && strings.Contains(e.Message, f)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
}

// removeTrainJob deletes the TrainJob and force-deletes its JobSet's pods (fake nodes have no kubelet
// to finish a graceful delete) until none is left.
func removeTrainJob(t *testing.T, tj *unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, client.IgnoreNotFound(env.Client.Delete(context.Background(), tj, client.PropagationPolicy(metav1.DeletePropagationBackground))))
	framework.Eventually(t, wait, "the pods of TrainJob "+tj.GetName()+" gone", func(ctx context.Context) (bool, error) {
		pods, err := jobSetPods(ctx, tj.GetNamespace(), tj.GetName())
		if err != nil {
			return false, err
		}
		for i := range pods {
			_ = client.IgnoreNotFound(env.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)))
		}
		return len(pods) == 0, nil
	})
}

// rankBlock names the sub-group of a TrainJob pod by its rank (completion index): ranks 0-3, 4-7.
func rankBlock(p corev1.Pod) string {
	if i, _ := strconv.Atoi(p.Labels[batchv1.JobCompletionIndexAnnotation]); i < 4 {
		return "ranks 0-3"
	}
	return "ranks 4-7"
}

// A TrainJob's gang split per N ranks (examples/subgroups/trainjob-by-ranks.yaml: 8 nodes of 8 GPUs,
// hyperbatch.dev/subgroup-by: pods, subgroup-pods 4, each sub-group in one tier-1 rack, the gang in
// one tier-2 spine by the runtime's podGroupPolicy.volcano), with the real Trainer v2.3.0, JobSet and
// Job controllers and hyperbatch-scheduler (bin/scheduler, waitForEnqueue on) on the fragmented
// fabric of TestSubGroupWaysIn (spine-0 has room for the 8 pods but no rack there holds 4):
//   - Trainer's PodGroup: while the podgroup controller's writes are held, the TrainJob's pods are
//     refused by the PodGroup gate (SubGroupsMissing) and none exists; once released the PodGroup
//     gets node-c0 and node-c1 (4 ranks each, hard tier 1) before any pod is created, and each
//     sub-group lands in one rack of spine-1;
//   - the JobSet path (the same runtime without podGroupPolicy, the gang's tier on the JobSet by the
//     runtime's template annotations): the PodGroup hyperbatch makes for the JobSet gets the same
//     sub-groups, placed the same way;
//   - bad values: a sub-group size that does not divide the 8 ranks gets no PodGroup and an
//     InvalidGang Event on the TrainJob naming the annotation and the fix; an unknown subgroup-by is
//     refused on CREATE, naming the field.
func TestTrainJobSubGroups(t *testing.T) {
	startTrainer(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := namespace(t)
	queue := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "tjsg-" + ns}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}}
	require.NoError(t, env.Client.Create(ctx, queue))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), queue) })
	governBy(t, ns, "tjsg-policy", builders.MakePolicy("tjsg-"+ns).Weight(5).Selector("tjsg-policy", ns).Queue(queue.Name).
		Scheduler("hyperbatch-scheduler").AllowedQueues(queue.Name).Obj())
	const prefix = "tjsg"
	rackOf := subGroupFabric(t, cs, ns, prefix, true)
	startPodGroupStatus(t)
	startSchedulerBinary(t)

	objs := exampleObjects(t, "trainjob-by-ranks.yaml", ns)
	require.Len(t, objs, 2)
	runtime, tj := objs[0], objs[1]
	require.Equal(t, "TrainingRuntime", runtime.GetKind())
	require.Equal(t, "TrainJob", tj.GetKind())
	pinToFabric(t, runtime, prefix)
	jobSetRuntime := runtime.DeepCopy()
	require.NoError(t, env.Client.Create(ctx, runtime))

	// Trainer's PodGroup, with the podgroup controller held: the gate keeps the pods out.
	order := watchGang(t, ns, tj.GetName())
	hold.Hold()
	t.Cleanup(hold.Release)
	require.NoError(t, env.Client.Create(ctx, tj))
	framework.Eventually(t, wait, "a pod of TrainJob "+tj.GetName()+" refused with "+hbwebhook.ReasonSubGroupsMissing, func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Job" && e.Reason == "FailedCreate" && strings.Contains(e.Message, hbwebhook.ReasonSubGroupsMissing) &&
				strings.Contains(e.Message, "TrainJob "+tj.GetName()) {
				return true, nil
			}
		}
		return false, nil
	})
	require.Positive(t, hold.Blocked(), "the podgroup controller did not try to write Trainer's PodGroup")
	pods, err := jobSetPods(ctx, ns, tj.GetName())
	require.NoError(t, err)
	require.Empty(t, pods, "pods of the TrainJob exist while its PodGroup has no sub-groups")
	pg := &schedulingv1beta1.PodGroup{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(tj), pg))
	require.Empty(t, pg.Spec.SubGroupPolicy)
	hold.Release()

	framework.Eventually(t, wait, "Trainer's PodGroup with the TrainJob's sub-groups", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(tj), pg)
		return err == nil && len(pg.Spec.SubGroupPolicy) == 2, client.IgnoreNotFound(err)
	})
	owner := metav1.GetControllerOf(pg)
	require.NotNil(t, owner)
	assert.Equal(t, "TrainJob", owner.Kind, "the PodGroup is Trainer's")
	require.NotNil(t, pg.Spec.NetworkTopology)
	require.NotNil(t, pg.Spec.NetworkTopology.HighestTierAllowed)
	assert.Equal(t, 2, *pg.Spec.NetworkTopology.HighestTierAllowed, "the runtime's podGroupPolicy.volcano.networkTopology")
	assert.Equal(t, int32(8), pg.Spec.MinMember)
	for i, p := range pg.Spec.SubGroupPolicy {
		assert.Equal(t, fmt.Sprintf("node-c%d", i), p.Name)
		assert.Equal(t, int32(4), *p.SubGroupSize)
		assert.Equal(t, []string{jobsetv1alpha2.JobIndexKey}, p.MatchLabelKeys)
		require.NotNil(t, p.NetworkTopology)
		assert.Equal(t, 1, *p.NetworkTopology.HighestTierAllowed)
	}
	inSpine1(t, "ranks", boundRacks(t, ns, tj.GetName(), rackOf, rankBlock))
	snap := order.Snapshot()
	policyRV, created := snap.SubGroupRV, snap.Created
	require.NotZero(t, policyRV)
	require.Len(t, created, 8)
	for p, rv := range created {
		assert.Greater(t, rv, policyRV, "pod %s was created (resourceVersion %d) before the PodGroup had its sub-groups (%d)", p, rv, policyRV)
	}
	requireGangScheduled(t, cs, ns, pg.Name, "placed in HyperNode "+prefix+"-spine-1 (tier 2)",
		"node-c0[0] in "+prefix+"-rack-", "node-c1[0] in "+prefix+"-rack-")
	trainJobEvent(t, ns, tj.GetName(), podgroup.ReasonSubGroupsWritten, "subGroupPolicy node-c0 (4 pods), node-c1 (4 pods)")
	removeTrainJob(t, tj)

	// The JobSet path: the runtime without podGroupPolicy, the gang's tier on the JobSet.
	jobSetRuntime.SetName("torch-subgroups-jobset")
	unstructured.RemoveNestedField(jobSetRuntime.Object, "spec", "podGroupPolicy")
	require.NoError(t, unstructured.SetNestedStringMap(jobSetRuntime.Object, map[string]string{
		defaults.NetworkTopologyModeAnnotation: "hard", defaults.NetworkTopologyHighestTierAnnotation: "2"}, "spec", "template", "metadata", "annotations"))
	require.NoError(t, env.Client.Create(ctx, jobSetRuntime))
	viaJobSet := trainerObject("TrainJob", ns, "tp-by-ranks-jobset", map[string]any{
		"runtimeRef": map[string]any{"name": jobSetRuntime.GetName(), "kind": "TrainingRuntime"}})
	viaJobSet.SetAnnotations(tj.GetAnnotations())
	require.NoError(t, env.Client.Create(ctx, viaJobSet))
	jpg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "the JobSet's PodGroup with the TrainJob's sub-groups", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(viaJobSet), jpg)
		return err == nil && len(jpg.Spec.SubGroupPolicy) == 2, client.IgnoreNotFound(err)
	})
	assert.Equal(t, "JobSet", metav1.GetControllerOf(jpg).Kind, "the PodGroup is hyperbatch's, for the JobSet")
	assert.Equal(t, pg.Spec.SubGroupPolicy, jpg.Spec.SubGroupPolicy)
	inSpine1(t, "ranks", boundRacks(t, ns, viaJobSet.GetName(), rackOf, rankBlock))
	removeTrainJob(t, viaJobSet)

	// Bad values.
	bad := trainerObject("TrainJob", ns, "tp-bad", map[string]any{
		"runtimeRef": map[string]any{"name": jobSetRuntime.GetName(), "kind": "TrainingRuntime"}})
	bad.SetAnnotations(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByPods, hbv1.SubGroupPodsAnnotation: "3"})
	require.NoError(t, env.Client.Create(ctx, bad))
	trainJobEvent(t, ns, bad.GetName(), podgroup.ReasonInvalidGang,
		"no PodGroup: TrainJob tp-bad: annotation hyperbatch.dev/subgroup-pods=3 does not divide the 8 pods each Job of spec.replicatedJobs[0] (node) runs at once: choose a divisor or a multiple of 8")
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(bad), &schedulingv1beta1.PodGroup{})
	assert.True(t, apierrors.IsNotFound(err), "TrainJob tp-bad has a PodGroup: %v", err)
	removeTrainJob(t, bad)
	unknown := trainerObject("TrainJob", ns, "tp-unknown", map[string]any{"runtimeRef": map[string]any{"name": runtime.GetName(), "kind": "TrainingRuntime"}})
	unknown.SetAnnotations(map[string]string{hbv1.SubGroupByAnnotation: "rank"})
	err = env.Client.Create(ctx, unknown)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `metadata.annotations: Invalid value: "hyperbatch.dev/subgroup-by=rank": annotation hyperbatch.dev/subgroup-by="rank" is not "replica" or "pods": set one of them, or remove it`)
}
