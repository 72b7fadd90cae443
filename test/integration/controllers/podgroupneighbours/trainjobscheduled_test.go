package podgroupneighbours

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// playKubelet sets the phase of the bound pods of JobSet name, as the kubelet of a fake node would.
func playKubelet(t *testing.T, cs kubernetes.Interface, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	pods, err := jobSetPods(context.Background(), ns, name)
	require.NoError(t, err)
	for _, p := range pods {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Phase = phase
			ready := corev1.ConditionFalse
			if phase == corev1.PodRunning {
				ready = corev1.ConditionTrue
			}
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()})
			if phase == corev1.PodSucceeded {
				cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
			}
			_, err = cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			return err
		}), "pod %s", p.Name)
	}
}

// startSchedulerBinary runs bin/scheduler (`make build`) with docs/scheduler-config.yaml, as shipped
// (waitForEnqueue on), for the test: a process of its own, since kube-scheduler's app.Setup runs
// once per process (configz) and TestSubGroupWaysIn runs it in-process in this package.
func startSchedulerBinary(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, framework.WriteKubeconfig(env.Config, kc))
	conf, err := framework.DocumentedSchedulerConfig()
	require.NoError(t, err)
	conf["clientConnection"] = map[string]any{"kubeconfig": kc}
	raw, err := json.Marshal(conf)
	require.NoError(t, err)
	config := filepath.Join(dir, "scheduler-config.yaml")
	require.NoError(t, os.WriteFile(config, raw, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := framework.StartScheduler(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: dir}, config)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.LogTail(60))
		}
		assert.NoError(t, p.Stop())
	})
}

// Trainer's own Volcano PodGroup (a runtime with podGroupPolicy.volcano) in a namespace whose
// WorkloadPolicy asks for hard topology at tier 1, scheduled by hyperbatch-scheduler (bin/scheduler, waiting for
// Inqueue, as shipped) with the PodGroup status controller: on two leaves where only leaf b has
// room for the 4 pods (leaf a: 2 × 1 CPU; leaf b: 2 × 2 CPU; 1 CPU a pod; 6 CPUs in all), every pod
// binds in leaf b, none before the PodGroup is Inqueue and all 4 pods exist, and the PodGroup moves
// Pending → Inqueue → Running → Completed as the pods run and succeed (the test plays the fake
// nodes' kubelet). Deleting the TrainJob removes the PodGroup (it is controlled by the TrainJob).
func TestTrainerPodGroupScheduledAsAGangInOneLeaf(t *testing.T) {
	start := time.Now()
	startTrainer(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := namespace(t)

	// The queue starts with room for 2 of the gang's 4 CPUs: the PodGroup waits Pending.
	queue := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "tjs-" + ns}, Spec: schedulingv1beta1.QueueSpec{Weight: 1,
		Capability: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	require.NoError(t, env.Client.Create(ctx, queue))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), queue) })
	governBy(t, ns, "tjs-policy", builders.MakePolicy("tjs-"+ns).Weight(5).Selector("tjs-policy", ns).Queue(queue.Name).
		Scheduler("hyperbatch-scheduler").HardTopology(1).AllowedQueues(queue.Name).Obj())

	// The fabric: leaf a (2 nodes of 1 CPU), leaf b (2 nodes of 2 CPUs), one tier-2 root.
	leafOf := map[string]string{}
	var leaves [][]topologyv1alpha1.MemberSpec
	for _, leaf := range []struct {
		name string
		cpu  string
	}{{"a", "1"}, {"b", "2"}} {
		var members []topologyv1alpha1.MemberSpec
		for i := range 2 {
			n := fmt.Sprintf("%s-%s-n%d", ns, leaf.name, i)
			// Tainted for this test's pods only: pods other tests of the package left behind for
			// hyperbatch-scheduler (a full run had three bound here) must not take the room.
			framework.CreateReadyNode(t, cs, builders.MakeNode(n).Label("hb-test", ns).Taint("hb-test", ns, corev1.TaintEffectNoSchedule).Obj(), corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(leaf.cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")})
			leafOf[n] = leaf.name
			members = append(members, builders.NodeMember(n))
		}
		leaves = append(leaves, members)
	}
	var rootMembers []topologyv1alpha1.MemberSpec
	for i, leaf := range []string{"a", "b"} {
		hn := builders.MakeHyperNode(ns+"-leaf-"+leaf, 1).Members(leaves[i]...).Obj()
		require.NoError(t, env.Client.Create(ctx, hn))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), hn) })
		rootMembers = append(rootMembers, builders.HyperNodeMember(hn.Name))
	}
	root := builders.MakeHyperNode(ns+"-root", 2).Members(rootMembers...).Obj()
	require.NoError(t, env.Client.Create(ctx, root))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), root) })

	startPodGroupStatus(t)
	startSchedulerBinary(t)

	rt := "hb-sched-" + ns
	runtime := trainerObject("ClusterTrainingRuntime", "", rt, map[string]any{
		"mlPolicy":       map[string]any{"numNodes": int64(4)},
		"podGroupPolicy": map[string]any{"volcano": map[string]any{}},
		"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "node",
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"nodeSelector": map[string]any{"hb-test": ns},
					"tolerations":  []any{map[string]any{"key": "hb-test", "operator": "Equal", "value": ns, "effect": "NoSchedule"}},
					"containers": []any{map[string]any{"name": "node", "image": "busybox",
						"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "64Mi"}}}},
				}}},
			},
		}}}},
	})
	require.NoError(t, env.Client.Create(ctx, runtime))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), runtime) })

	const name = "gang"
	log := watchGang(t, ns, name)
	setup := time.Since(start)
	tj := trainerObject("TrainJob", ns, name, map[string]any{"runtimeRef": map[string]any{"name": rt}})
	require.NoError(t, env.Client.Create(ctx, tj))
	created := time.Now()

	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, "Trainer's PodGroup", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
		return err == nil, client.IgnoreNotFound(err)
	})
	require.NotNil(t, metav1.GetControllerOf(pg))
	assert.Equal(t, "TrainJob", metav1.GetControllerOf(pg).Kind)
	assert.Equal(t, queue.Name, pg.Spec.Queue)
	assert.Equal(t, int32(4), pg.Spec.MinMember)
	require.NotNil(t, pg.Spec.NetworkTopology, "the policy's topology")
	assert.EqualValues(t, "hard", pg.Spec.NetworkTopology.Mode)
	require.NotNil(t, pg.Spec.NetworkTopology.HighestTierAllowed)
	assert.Equal(t, 1, *pg.Spec.NetworkTopology.HighestTierAllowed)

	// Pending (the queue's capability exceeded) with all 4 pods created: none is bound.
	log.WaitPhase(t, wait, schedulingv1beta1.PodGroupPending)
	framework.Eventually(t, wait, "4 pods of TrainJob "+name, func(context.Context) (bool, error) {
		created := log.Snapshot().Created
		return len(created) == 4, nil
	})
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg))
	require.Equal(t, schedulingv1beta1.PodGroupPending, pg.Status.Phase)
	boundWhilePending := log.Snapshot().Bound
	assert.Empty(t, boundWhilePending, "pods bound while the PodGroup was Pending")
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(queue), queue); err != nil {
			return err
		}
		queue.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		return env.Client.Update(ctx, queue)
	}))
	opened := time.Now()

	framework.Eventually(t, 2*wait, "4 bound pods of TrainJob "+name, func(context.Context) (bool, error) {
		bound := log.Snapshot().Bound
		return len(bound) == 4, nil
	})
	placed := time.Since(opened)
	pods, err := jobSetPods(ctx, ns, name)
	require.NoError(t, err)
	require.Len(t, pods, 4)
	for _, p := range pods {
		assert.Equal(t, "hyperbatch-scheduler", p.Spec.SchedulerName, "pod %s", p.Name)
		assert.Equal(t, "b", leafOf[p.Spec.NodeName], "pod %s on %s, outside leaf b", p.Name, p.Spec.NodeName)
	}
	snap := log.Snapshot()
	phaseRV, createdRV, boundRV := snap.PhaseRV, snap.Created, snap.Bound
	firstBind := uint64(0)
	for _, rv := range boundRV {
		if firstBind == 0 || rv < firstBind {
			firstBind = rv
		}
	}
	require.Contains(t, phaseRV, schedulingv1beta1.PodGroupInqueue, "the PodGroup was never Inqueue before its pods bound")
	assert.Less(t, phaseRV[schedulingv1beta1.PodGroupInqueue], firstBind, "a pod bound (resourceVersion %d) before the PodGroup was Inqueue", firstBind)
	require.Len(t, createdRV, 4)
	for p, rv := range createdRV {
		assert.Less(t, rv, firstBind, "pod %s was created (resourceVersion %d) after the first binding (%d): the gang bound before all could", p, rv, firstBind)
	}

	playKubelet(t, cs, ns, name, corev1.PodRunning)
	log.WaitPhase(t, wait, schedulingv1beta1.PodGroupRunning)
	playKubelet(t, cs, ns, name, corev1.PodSucceeded)
	log.WaitPhase(t, wait, schedulingv1beta1.PodGroupCompleted)
	completed := time.Since(created)
	phases := log.Snapshot().Phases
	assert.Equal(t, []schedulingv1beta1.PodGroupPhase{schedulingv1beta1.PodGroupPending, schedulingv1beta1.PodGroupInqueue,
		schedulingv1beta1.PodGroupRunning, schedulingv1beta1.PodGroupCompleted}, phases)

	require.NoError(t, env.Client.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	framework.Eventually(t, wait, "PodGroup "+name+" gone after its TrainJob", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pg), &schedulingv1beta1.PodGroup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	t.Logf("set-up %s; queue opened → 4 pods bound %s; TrainJob created → PodGroup Completed %s → PodGroup gone %s",
		setup.Round(time.Millisecond), placed.Round(time.Millisecond), completed.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
}
