//go:build e2e

package e2e

// Kubeflow Trainer's own Volcano example (examples/yaml/04-volcano-integration.yaml of the module
// hack/tools/trainer pins) applied to the local cluster as a new user would, with `kubectl apply`, in
// a namespace a WorkloadPolicy governs: Trainer's controller manager (started by hack/localcluster)
// makes the PodGroup, hyperbatch-scheduler places the gang in one HyperNode, the pods run to
// completion (kwok's stages, or the worker image on real nodes) and the TrainJob ends Complete.

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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	itframework "github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Trainer's 04-volcano-integration.yaml in a namespace whose policy gives a queue,
// hyperbatch-scheduler and hard topology up to tier 2 (the README's policy): Trainer makes the
// PodGroup (the TrainJob's name, controlled by it, minMember 4) with the policy's queue and topology
// and hyperbatch's price (4 × resourcesPerNode.requests); hyperbatch-scheduler binds no pod before all
// 4 exist and the PodGroup is Inqueue, and binds all 4 inside one HyperNode of tier 2 or lower; the
// pods run to completion, the TrainJob ends Complete and the PodGroup Completed; deleting the
// example removes the PodGroup with the TrainJob.
//
// On kwok nodes the example is applied unchanged and kwok completes its pods. Real nodes cannot pull
// its pytorch image, so there the ClusterTrainingRuntime is the example's and the TrainJob is the
// example's with what a user would change for an image of their own: spec.trainer's image, command
// and resourcesPerNode, and a runtimePatches entry with the node selector; the worker image really
// runs (5 s) in every pod.
func TestTrainerVolcanoExampleOnLocalCluster(t *testing.T) {
	dir, err := itframework.TrainerModuleDir()
	require.NoError(t, err)
	example := filepath.Join(dir, "examples", "yaml", "04-volcano-integration.yaml")
	const name = "volcano-example" // the example's TrainJob
	perNode := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	if nodes := e2efw.Workload(); !nodes.Simulated() {
		example, perNode = trainerExampleForRealNodes(t, example, nodes)
	}
	ns := primary.Namespace(t)
	queue := "tj-" + ns
	openQueue(t, queue)
	policy := journeyPolicy(t, ns, hbv1.PolicyDefaults{Queue: queue, SchedulerName: "hyperbatch-scheduler",
		NetworkTopology: &hbv1.NetworkTopology{Mode: "hard", HighestTierAllowed: ptr.To[int32](2)}})
	tree := readHyperNodeTree(t)
	gang := itframework.WatchGang(t, wc, ns, name)
	t.Cleanup(func() {
		_, _ = primary.Kubectl("delete", "-n", ns, "-f", example, "--ignore-not-found", "--wait=false")
	})

	// The webhook reads policies from an informer: a TrainJob applied before it has the new policy
	// is deleted (with what Trainer made of it) and applied again.
	tj := &unstructured.Unstructured{}
	tj.SetGroupVersionKind(defaults.TrainJobGVK)
	e2efw.Poll(t, 90*time.Second, "kubectl apply of Trainer's example to be defaulted by "+policy, func(ctx context.Context) (bool, error) {
		if out, err := primary.Kubectl("apply", "-n", ns, "-f", example); err != nil {
			return false, fmt.Errorf("kubectl apply -f %s: %w: %s", example, err, out)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, err
		}
		if tj.GetAnnotations()[hbv1.DefaultedByAnnotation] != "" {
			return true, nil
		}
		_, _ = primary.Kubectl("delete", "-n", ns, "trainjob", name, "--wait")
		return false, nil
	})
	q, _ := defaults.TrainJobQueue(tj)
	assert.Equal(t, queue, q, "the policy's queue where Trainer reads it (runtimePatches)")

	pg := &schedulingv1beta1.PodGroup{}
	e2efw.Poll(t, 60*time.Second, "Trainer's PodGroup priced by hyperbatch", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
		return err == nil && pg.Annotations[hbv1.PricedMinResourcesAnnotation] != "", client.IgnoreNotFound(err)
	})
	owner := metav1.GetControllerOf(pg)
	require.NotNil(t, owner, "the PodGroup has no controller")
	assert.Equal(t, "TrainJob", owner.Kind)
	assert.Equal(t, tj.GetUID(), owner.UID)
	assert.Equal(t, int32(4), pg.Spec.MinMember)
	assert.Equal(t, queue, pg.Spec.Queue)
	require.NotNil(t, pg.Spec.NetworkTopology, "the policy's topology")
	require.NotNil(t, pg.Spec.NetworkTopology.HighestTierAllowed)
	assert.Equal(t, 2, *pg.Spec.NetworkTopology.HighestTierAllowed)
	require.NotNil(t, pg.Spec.MinResources)
	for res, per := range perNode {
		got := (*pg.Spec.MinResources)[res]
		w := per.DeepCopy()
		w.Mul(4)
		assert.Zero(t, w.Cmp(got), "minResources %s: want %s (4 × resourcesPerNode.requests), got %s", res, w.String(), got.String())
	}

	// Scheduled as a gang: 4 pods bound, none before all 4 existed and the PodGroup was Inqueue.
	e2efw.Poll(t, 2*time.Minute, "the 4 pods of TrainJob "+name+" bound", func(context.Context) (bool, error) {
		return len(gang.Snapshot().Bound) == 4, nil
	})
	var pods corev1.PodList
	require.NoError(t, c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}))
	require.Len(t, pods.Items, 4)
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		assert.Equal(t, "hyperbatch-scheduler", p.Spec.SchedulerName, "pod %s", p.Name)
		assert.Equal(t, name, p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in Trainer's PodGroup", p.Name)
		nodes[p.Spec.NodeName] = true
	}
	var holder string
	for hn, members := range tree.nodes {
		inside := tree.tier[hn] <= 2
		for n := range nodes {
			inside = inside && members[n]
		}
		if inside {
			holder = hn
		}
	}
	assert.NotEmpty(t, holder, "the gang's nodes %v are in no HyperNode of tier 2 or lower", nodes)
	snap := gang.Snapshot()
	phaseRV, created, first := snap.PhaseRV, snap.Created, snap.FirstBound()
	require.Len(t, created, 4)
	for p, rv := range created {
		assert.Less(t, rv, first, "pod %s was created (resourceVersion %d) after the first binding (%d)", p, rv, first)
	}
	require.Contains(t, phaseRV, schedulingv1beta1.PodGroupInqueue, "the PodGroup was never Inqueue")
	assert.Less(t, phaseRV[schedulingv1beta1.PodGroupInqueue], first, "a pod bound before the PodGroup was Inqueue")

	// The pods run to completion (kwok's stages, or the worker in containerd): the TrainJob ends
	// Complete, the PodGroup Completed.
	e2efw.Poll(t, 3*time.Minute, "TrainJob "+name+" to finish", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return false, err
		}
		return workload.TrainJobFinishedAt(tj) != nil, nil
	})
	status, _, _ := itframework.TrainJobCondition(tj, workload.TrainJobComplete)
	failed, why, _ := itframework.TrainJobCondition(tj, workload.TrainJobFailed)
	require.Equal(t, "True", status, "TrainJob %s finished but is not Complete (Failed %s, reason %s)", name, failed, why)
	// Every pod ran on the node choice's nodes; on real nodes its worker container exited 0.
	nodeChoice := e2efw.Workload()
	require.NoError(t, c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}))
	require.Len(t, pods.Items, 4)
	for _, p := range pods.Items {
		var node corev1.Node
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, &node))
		for k, v := range nodeChoice.Selector {
			assert.Equal(t, v, node.Labels[k], "pod %s ran on node %s, outside the node choice %v", p.Name, node.Name, nodeChoice.Selector)
		}
		if nodeChoice.Simulated() {
			continue
		}
		require.Len(t, p.Status.ContainerStatuses, 1, "pod %s", p.Name)
		term := p.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, term, "pod %s: its container has not terminated", p.Name)
		assert.Equal(t, int32(0), term.ExitCode, "pod %s: the worker exited %d (%s)", p.Name, term.ExitCode, term.Reason)
	}
	e2efw.Poll(t, 60*time.Second, "the PodGroup Completed", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pg), pg)
		return err == nil && pg.Status.Phase == schedulingv1beta1.PodGroupCompleted, err
	})

	// Deleting the example: the PodGroup goes with the TrainJob (the garbage collector).
	out, err := primary.Kubectl("delete", "-n", ns, "-f", example, "--wait=false")
	require.NoError(t, err, "kubectl delete: %s", out)
	primary.WaitDeleted(t, pg, "Trainer's PodGroup to go with its TrainJob", 60*time.Second)
}

// trainerExampleForRealNodes writes Trainer's example (at path) for real nodes into a file of its
// own: the ClusterTrainingRuntime unchanged; the TrainJob with the worker image run for 5 s in place
// of the pytorch image and its python command, small requests, and a runtimePatches entry giving its
// pods the node choice's selector and tolerations. It returns the file and the per-node requests.
func trainerExampleForRealNodes(t *testing.T, path string, nodes e2efw.Nodes) (string, corev1.ResourceList) {
	t.Helper()
	objs := itframework.ReadObjects(t, path)
	perNode := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	worker := nodes.RunningContainer("node", 5*time.Second)
	var podSpec corev1.PodSpec
	nodes.Apply(&podSpec)
	found := false
	for _, o := range objs {
		if o.GetKind() != "TrainJob" {
			continue
		}
		found = true
		require.NoError(t, unstructured.SetNestedField(o.Object, worker.Image, "spec", "trainer", "image"))
		unstructured.RemoveNestedField(o.Object, "spec", "trainer", "command")
		require.NoError(t, unstructured.SetNestedStringSlice(o.Object, worker.Args, "spec", "trainer", "args"))
		requests := map[string]any{}
		for r, q := range perNode {
			requests[string(r)] = q.String()
		}
		require.NoError(t, unstructured.SetNestedMap(o.Object, map[string]any{"requests": requests}, "spec", "trainer", "resourcesPerNode"))
		sel := map[string]any{}
		for k, v := range podSpec.NodeSelector {
			sel[k] = v
		}
		podPatch := map[string]any{"nodeSelector": sel}
		if len(podSpec.Tolerations) > 0 {
			tol, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
				T []corev1.Toleration `json:"t"`
			}{podSpec.Tolerations})
			require.NoError(t, err)
			podPatch["tolerations"] = tol["t"]
		}
		patch := map[string]any{"manager": "e2e.hyperbatch.dev/node-choice", "trainingRuntimeSpec": map[string]any{
			"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
				"name": "node", "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": podPatch}}}}}}}}}
		require.NoError(t, unstructured.SetNestedSlice(o.Object, []any{patch}, "spec", "runtimePatches"))
	}
	require.True(t, found, "%s has no TrainJob", path)
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	out := filepath.Join(t.TempDir(), "04-volcano-integration-real-nodes.yaml")
	require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
	return out, perNode
}
