package podgroupneighbours

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/schedulerenv"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// example reads one of examples/subgroups into obj, in namespace ns.
func example(t *testing.T, file, ns string, obj client.Object) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "examples", "subgroups", file))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(raw, obj))
	obj.SetNamespace(ns)
}

// subGroupFabric makes 6 racks (tier 1) of 4 fake 8-GPU nodes, spine-0 = racks 0-2 and spine-1 =
// racks 3-5 (tier 2), the examples' shape (make run's leaves have 4 such nodes), and binds an 8-GPU
// filler to the first node of racks 0-2: spine-0 has 9 nodes free, room for an 8-pod gang of 8 GPUs
// and the best fit for it as a flat gang, but no rack there holds 4 of its pods; spine-1's racks
// hold 4 each. It returns each node's rack. Nodes are <prefix>-r<rack>-n<i>, racks <prefix>-rack-<r>
// and spines <prefix>-spine-<s>; with taint, every node carries the NoSchedule taint hb-test=<prefix>.
func subGroupFabric(t *testing.T, cs kubernetes.Interface, ns, prefix string, taint bool) map[string]int {
	t.Helper()
	ctx := context.Background()
	rackOf := map[string]int{}
	var spines [2][]topologyv1alpha1.MemberSpec
	for r := 0; r < 6; r++ {
		var members []topologyv1alpha1.MemberSpec
		for i := 0; i < 4; i++ {
			n := fmt.Sprintf("%s-r%d-n%d", prefix, r, i)
			node := builders.MakeNode(n).Label("hb-test", prefix)
			if taint {
				node = node.Taint("hb-test", prefix, corev1.TaintEffectNoSchedule)
			}
			framework.CreateReadyNode(t, cs, node.Obj(), builders.GPUNode())
			rackOf[n] = r
			members = append(members, builders.NodeMember(n))
		}
		rack := fmt.Sprintf("%s-rack-%d", prefix, r)
		require.NoError(t, env.Client.Create(ctx, builders.MakeHyperNode(rack, 1).Members(members...).Obj()))
		spines[r/3] = append(spines[r/3], builders.HyperNodeMember(rack))
	}
	for s := range spines {
		require.NoError(t, env.Client.Create(ctx, builders.MakeHyperNode(fmt.Sprintf("%s-spine-%d", prefix, s), 2).Members(spines[s]...).Obj()))
	}
	for r := 0; r < 3; r++ {
		f := builders.MakeGangPod(ns, fmt.Sprintf("filler-%d", r), "", "default-scheduler").GPUs(8).Obj()
		f.Spec.NodeName = fmt.Sprintf("%s-r%d-n0", prefix, r)
		require.NoError(t, env.Client.Create(ctx, f))
	}
	return rackOf
}

// inSpine1 checks that every part is in one rack, each of spine-1 (racks 3-5).
func inSpine1(t *testing.T, what string, parts map[string]map[int]bool) {
	t.Helper()
	require.Len(t, parts, 2, what)
	for part, racks := range parts {
		require.Len(t, racks, 1, "%s %s spans racks %v", what, part, racks)
		for r := range racks {
			require.GreaterOrEqual(t, r, 3, "%s %s in rack %d, outside spine-1", what, part, r)
		}
	}
}

// boundRacks waits until the JobSet's 8 pods are bound and returns the racks of each sub-group,
// named by part(pod).
func boundRacks(t *testing.T, ns, name string, rackOf map[string]int, part func(corev1.Pod) string) map[string]map[int]bool {
	const want = 8
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(t, 2*wait, fmt.Sprintf("%d bound pods of JobSet %s", want, name), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = jobSetPods(ctx, ns, name); err != nil || len(pods) != want {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	out := map[string]map[int]bool{}
	for _, p := range pods {
		k := part(p)
		if out[k] == nil {
			out[k] = map[int]bool{}
		}
		out[k][rackOf[p.Spec.NodeName]] = true
	}
	return out
}

// removeJobSet deletes the JobSet and force-deletes its pods (fake nodes have no kubelet to finish a
// graceful delete) until none is left.
func removeJobSet(t *testing.T, js *jobsetv1alpha2.JobSet) {
	t.Helper()
	require.NoError(t, client.IgnoreNotFound(env.Client.Delete(context.Background(), js, client.PropagationPolicy(metav1.DeletePropagationBackground))))
	framework.Eventually(t, wait, "the pods of JobSet "+js.Name+" gone", func(ctx context.Context) (bool, error) {
		pods, err := jobSetPods(ctx, js.Namespace, js.Name)
		if err != nil {
			return false, err
		}
		for i := range pods {
			_ = client.IgnoreNotFound(env.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)))
		}
		return len(pods) == 0, nil
	})
}

// The ways in for sub-groups, with the real neighbours and hyperbatch-scheduler. A JobSet asks for
// sub-groups with hyperbatch.dev/subgroup-by; with the real JobSet controller, the
// Job controller (kube-controller-manager) and hyperbatch-scheduler, the PodGroup gets the policy,
// the Jobs' pods match it by the labels those controllers give them, and each sub-group lands in
// one rack, the gang in one spine (spine-1: spine-0 has room for the 32 GPUs in total but no rack
// holds 16). By replica: each Job of 4 pods. By pods: each 4 pods of one 8-pod Job, in
// completion-index order. Then a Volcano Job's partitions (volcanoJobPartitions).
func TestSubGroupWaysIn(t *testing.T) {
	framework.StartJobSetAndJobControllers(t, env.Env)
	ctx, cancel := context.WithCancel(context.Background())
	_, done, err := schedulerenv.Run(ctx, env.Config, t.TempDir(), schedulerenv.Options{WithoutEnqueueWait: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Log("scheduler did not stop within 30s")
		}
	})
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := namespace(t)
	rackOf := subGroupFabric(t, cs, ns, "sg", false)

	byReplica := &jobsetv1alpha2.JobSet{}
	example(t, "jobset-by-replica.yaml", ns, byReplica)
	require.NoError(t, env.Client.Create(ctx, byReplica))
	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "the PodGroup of tp-by-replica with its subGroupPolicy", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: byReplica.Name}, pg)
		return err == nil && len(pg.Spec.SubGroupPolicy) == 1, client.IgnoreNotFound(err)
	})
	p := pg.Spec.SubGroupPolicy[0]
	require.Equal(t, "workers", p.Name)
	require.Equal(t, int32(4), *p.SubGroupSize)
	require.Equal(t, []string{jobsetv1alpha2.JobIndexKey}, p.MatchLabelKeys)
	require.Equal(t, 1, *p.NetworkTopology.HighestTierAllowed)
	inSpine1(t, "Job", boundRacks(t, ns, byReplica.Name, rackOf, func(p corev1.Pod) string { return p.Labels[jobsetv1alpha2.JobIndexKey] }))
	requireGangScheduled(t, cs, ns, byReplica.Name, "placed in HyperNode sg-spine-1 (tier 2)", "sub-groups workers[0] in sg-rack-")
	removeJobSet(t, byReplica)

	byPods := &jobsetv1alpha2.JobSet{}
	example(t, "jobset-by-pods.yaml", ns, byPods)
	require.NoError(t, env.Client.Create(ctx, byPods))
	inSpine1(t, "completion indexes", boundRacks(t, ns, byPods.Name, rackOf, func(p corev1.Pod) string {
		if p.Labels[batchv1.JobCompletionIndexAnnotation] < "4" {
			return "c0"
		}
		return "c1"
	}))
	requireGangScheduled(t, cs, ns, byPods.Name, "placed in HyperNode sg-spine-1 (tier 2)", "workers-c0[0] in sg-rack-", "workers-c1[0] in sg-rack-")
	removeJobSet(t, byPods)

	volcanoJobPartitions(t, cs, rackOf)
}

// volcanoJobPartitions: a Volcano Job whose task has a partitionPolicy (2 partitions of 4 pods, hard
// tier 1; examples/subgroups/volcano-job-partitions.yaml), in a namespace no WorkloadPolicy governs (pod-webhook=disabled: only the podgroup-vcjob
// entry's match condition sends its PodGroup to hyperbatch). The real vc-controller-manager
// (v1.14.0-alpha.0) makes the PodGroup without subGroupPolicy and labels the pods with their task
// and index only; hyperbatch's PodGroup admission restores the partitions as sub-groups, the
// PodGroup status controller moves the PodGroup to Inqueue (so Volcano creates the pods), and
// hyperbatch-scheduler puts each partition in one rack of spine-1.
func volcanoJobPartitions(t *testing.T, cs kubernetes.Interface, rackOf map[string]int) {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t)
	labelNamespace(t, ns, map[string]string{hbv1.PodWebhookLabel: hbv1.PodWebhookLabelDisabled})
	ensureQueue(t, "default")
	startPodGroupStatus(t)
	startVolcanoControllers(t)

	job := &batchv1alpha1.Job{}
	example(t, "volcano-job-partitions.yaml", ns, job)
	require.NoError(t, env.Client.Create(ctx, job))
	require.NotNil(t, job.Spec.Tasks[0].PartitionPolicy, "the stored Job keeps its partitionPolicy")
	pg := volcanoJobPodGroup(t, job)
	require.Len(t, pg.Spec.SubGroupPolicy, 2, "the PodGroup did not get the Job's partitions")
	assert.Equal(t, "vcjob:"+job.Name+"/subGroupPolicy", pg.Annotations[hbv1.DefaultedByAnnotation])

	var pods corev1.PodList
	framework.Eventually(t, 2*wait, "8 bound pods of Volcano Job "+job.Name, func(ctx context.Context) (bool, error) {
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job.Name}); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 8, nil
	})
	parts := map[string]map[int]bool{}
	for _, p := range pods.Items {
		part := "p0"
		if p.Labels[batchv1alpha1.TaskIndex] >= "4" {
			part = "p1"
		}
		if parts[part] == nil {
			parts[part] = map[int]bool{}
		}
		parts[part][rackOf[p.Spec.NodeName]] = true
	}
	inSpine1(t, "partition", parts)
	requireGangScheduled(t, cs, ns, pg.Name, "placed in HyperNode sg-spine-1 (tier 2)", "worker-p0[worker] in sg-rack-", "worker-p1[worker] in sg-rack-")
}

// requireGangScheduled waits for a GangScheduled Event on the PodGroup with every fragment in its note.
func requireGangScheduled(t *testing.T, cs kubernetes.Interface, ns, pg string, fragments ...string) {
	const reason = "GangScheduled"
	t.Helper()
	var notes []string
	framework.Eventually(t, wait, fmt.Sprintf("a %s Event on PodGroup %s with %q", reason, pg, fragments), func(ctx context.Context) (bool, error) {
		l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notes = notes[:0]
		for _, e := range l.Items {
			if e.Regarding.Kind != "PodGroup" || e.Regarding.Name != pg {
				continue
			}
			notes = append(notes, e.Reason+": "+e.Note)
			if e.Reason != reason {
				continue
			}
			all := true
			for _, f := range fragments {
				all = all && strings.Contains(e.Note, f)
			}
			if all {
				return true, nil
			}
		}
		return false, nil
	})
}
