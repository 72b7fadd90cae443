//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/app"
	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/explain"
	"github.com/hyperbatch/hyperbatch/internal/cli/policies"
	"github.com/hyperbatch/hyperbatch/internal/cli/topology"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/internal/placementsvg"
	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// kubectlHyperbatch runs the plugin's command tree against the primary cluster and returns its
// standard output and exit code.
func kubectlHyperbatch(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := app.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", primary.Kubeconfig, "--context", primary.Context}, args...))
	cmd.SetContext(context.Background())
	code := exitcode.Of(cmd.Execute())
	if code == exitcode.Failed || code == exitcode.Usage {
		t.Fatalf("kubectl hyperbatch %v: exit %d: %s", args, code, errOut.String())
	}
	return out.String(), code
}

// decode runs the plugin with -o json into v.
func decode(t *testing.T, v any, args ...string) int {
	t.Helper()
	out, code := kubectlHyperbatch(t, append(args, "-o", "json")...)
	require.NoError(t, json.Unmarshal([]byte(out), v), out)
	return code
}

// labelNamespace gives the test namespace a label of its own, so the test's policies govern only it.
func labelNamespace(t *testing.T, ns string) (string, string) {
	t.Helper()
	var n corev1.Namespace
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: ns}, &n))
	orig := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["e2e.hyperbatch.dev/cli"] = ns
	// A merge patch: the manager's controllers write the new namespace too (its opt-in label, the
	// admission params), so an Update could lose the race.
	require.NoError(t, c.Patch(context.Background(), &n, client.MergeFrom(orig)))
	return "e2e.hyperbatch.dev/cli", ns
}

func createCleanup(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), obj))
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// policies: two policies of equal weight on the test namespace are a conflict, a policy allowing a
// missing Queue is reported with the controller's reason, and the exit code says so.
func TestCLIPolicies(t *testing.T) {
	ns := primary.Namespace(t)
	k, v := labelNamespace(t, ns)
	a := builders.MakePolicy(ns+"-a").Selector(k, v).Weight(7).Queue("default").Obj()
	b := builders.MakePolicy(ns+"-b").Selector(k, v).Weight(7).Queue("default").AllowedQueues("default", ns+"-missing").Obj()
	createCleanup(t, a)
	createCleanup(t, b)
	e2efw.Poll(t, 60*time.Second, "the workloadpolicy controller's status on both policies", func(ctx context.Context) (bool, error) {
		for _, p := range []*hbv1.WorkloadPolicy{a, b} {
			var cur hbv1.WorkloadPolicy
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
				return false, err
			}
			if cur.Status.ObservedGeneration != cur.Generation || apimeta.FindStatusCondition(cur.Status.Conditions, "QueuesExist") == nil ||
				apimeta.FindStatusCondition(cur.Status.Conditions, hbv1.PolicyConditionWeightTie) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	var r policies.Report
	code := decode(t, &r, "policies")
	assert.Equal(t, exitcode.Attention, code)
	assert.Contains(t, r.Conflicts, policies.Conflict{Namespace: ns, Weight: 7, Governing: a.Name, Tied: []string{b.Name}})
	var found, tie bool
	for _, n := range r.NotReady {
		assert.NotEqual(t, a.Name, n.Policy, "policy a is Ready, and wins the tie")
		if n.Policy != b.Name {
			continue
		}
		switch n.Condition {
		case "QueuesExist":
			found = true
			assert.Equal(t, "QueueNotFound", n.Reason)
			assert.Contains(t, n.Message, ns+"-missing")
		case hbv1.PolicyConditionWeightTie:
			tie = true
			assert.Equal(t, "True", n.Status)
			assert.Contains(t, n.Message, a.Name, "the lost tie names the winner")
		default:
			t.Errorf("policy b: unexpected condition %+v", n)
		}
	}
	assert.True(t, found, "policy b's missing queue is reported")
	assert.True(t, tie, "policy b's lost tie is reported")
	for _, p := range r.Policies {
		switch p.Name {
		case a.Name:
			assert.Equal(t, []string{ns}, p.Governs)
		case b.Name:
			assert.Equal(t, []string{ns}, p.Outranked)
		}
	}
}

// explain: a HyperJob split into children, each with its demand, its queue from the governing
// policy and its clusters, and the fields the policy filled.
func TestCLIExplainHyperJobSplit(t *testing.T) {
	ns := primary.Namespace(t)
	k, v := labelNamespace(t, ns)
	// A queue of the test's own: "default" is what the HyperJob CRD's schema puts in an empty
	// template already, so the policy would fill nothing.
	queue := builders.MakeQueue(ns + "-q").Obj()
	createCleanup(t, queue)
	pol := builders.MakePolicy(ns).Selector(k, v).Weight(50).Queue(queue.Name).Obj()
	createCleanup(t, pol)
	// The workload webhooks admit the namespace once the namespacelabel controller has seen the
	// policy govern it.
	e2efw.Poll(t, 60*time.Second, "the namespace opted in", func(ctx context.Context) (bool, error) {
		var n corev1.Namespace
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &n)
		return err == nil && n.Labels[hbv1.PodWebhookLabel] == "enabled", err
	})
	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "split", Namespace: ns}, Spec: trainingv1alpha1.HyperJobSpec{
		ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "trainer", Replicas: 3, ClusterNames: []string{"member-a", "member-b"},
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 2, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 2,
				Template: builders.PodTemplate(e2efw.Workload().Image, 4)}}}}}}}
	require.NoError(t, c.Create(context.Background(), hj))
	e2efw.Poll(t, 60*time.Second, "3 children", func(ctx context.Context) (bool, error) {
		var jobs batchv1alpha1.JobList
		err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{hbv1.HyperJobNameLabel: hj.Name})
		return len(jobs.Items) == 3, err
	})
	var r explain.Report
	assert.Equal(t, exitcode.OK, decode(t, &r, "explain", "hyperjob/split", "-n", ns))
	assert.Equal(t, pol.Name, r.Policy)
	require.NotEmpty(t, r.Candidates)
	assert.Equal(t, "governs", r.Candidates[0].Outcome)
	assert.Contains(t, r.Filled, explain.Filled{Field: "queue", Source: pol.Name, From: "WorkloadPolicy " + pol.Name})
	require.Len(t, r.Split, 3)
	for i, ch := range r.Split {
		assert.Equal(t, []string{"split-trainer-0", "split-trainer-1", "split-trainer-2"}[i], ch.Name)
		assert.Equal(t, int32(2), ch.Pods)
		assert.Equal(t, int64(8), ch.GPU, "2 pods × 4 GPUs")
		assert.Equal(t, queue.Name, ch.Queue)
		assert.Equal(t, []string{"member-a", "member-b"}, ch.Clusters)
	}
}

// topology and why on real gangs: one placed, one behind a full Queue, one waiting for a tier. The
// numbers are checked against the cluster's own objects.
func TestCLITopologyAndWhy(t *testing.T) {
	e2efw.SkipUnlessSimulated(t, "gangs of 8-GPU pods on nodes of 8 GPUs, against a discovered HyperNode tree: real nodes have no GPUs, and the real-node cluster keeps its fixed tree (hack/localcluster refuses --real-nodes with --discover)")
	ctx := context.Background()
	ns := primary.Namespace(t)
	capped, open := builders.MakeQueue(ns+"-capped").Capability(corev1.ResourceList{builders.GPU: resource.MustParse("16")}).Obj(), builders.MakeQueue(ns+"-open").Obj()
	createCleanup(t, capped)
	createCleanup(t, open)
	gang := func(name, queue string, pods int, gpus, minGPUs int64, tier int) {
		pg := builders.MakePodGroup(ns, name).MinMember(int32(pods)).Queue(queue).MinGPUs(minGPUs).HardTier(tier).Obj()
		require.NoError(t, c.Create(ctx, pg))
		for i := range pods {
			p := builders.MakeGangPod(ns, name+"-"+string(rune('0'+i)), name, "hyperbatch-scheduler").Image(e2efw.Workload().Image).GPUs(gpus).Obj()
			e2efw.Workload().Apply(&p.Spec)
			require.NoError(t, c.Create(ctx, p))
		}
	}
	phase := func(name string, want schedulingv1beta1.PodGroupPhase) {
		e2efw.Poll(t, 90*time.Second, name+" "+string(want), func(ctx context.Context) (bool, error) {
			var pg schedulingv1beta1.PodGroup
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pg)
			return err == nil && pg.Status.Phase == want, err
		})
	}
	gang("placed", capped.Name, 2, 8, 16, 1)
	phase("placed", schedulingv1beta1.PodGroupRunning)
	gang("full", capped.Name, 1, 8, 8, 1)
	e2efw.Poll(t, 60*time.Second, "full: QueueCapabilityExceeded", func(ctx context.Context) (bool, error) {
		var pg schedulingv1beta1.PodGroup
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "full"}, &pg); err != nil {
			return false, err
		}
		for _, cond := range pg.Status.Conditions {
			if cond.Type == "Unschedulable" && cond.Reason == "QueueCapabilityExceeded" {
				return true, nil
			}
		}
		return false, nil
	})
	gang("tier", open.Name, 5, 8, 0, 1)
	e2efw.Poll(t, 90*time.Second, "the scheduler's placement annotation on tier", func(ctx context.Context) (bool, error) {
		var pg schedulingv1beta1.PodGroup
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tier"}, &pg)
		return err == nil && pg.Annotations[gangcontract.PlacementAnnotation] != "", err
	})

	// The oracle: free GPUs per node from the cluster's nodes and its bound, unfinished pods.
	var nodes corev1.NodeList
	var pods corev1.PodList
	var hns topologyv1alpha1.HyperNodeList
	require.NoError(t, c.List(ctx, &nodes))
	require.NoError(t, c.List(ctx, &pods))
	require.NoError(t, c.List(ctx, &hns))
	free := map[string]int64{}
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[builders.GPU]
		free[n.Name] = q.Value()
	}
	placedNodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			q := ctr.Resources.Requests[builders.GPU]
			free[p.Spec.NodeName] -= q.Value()
		}
		if p.Namespace == ns && p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey] == "placed" {
			placedNodes[p.Spec.NodeName] = true
		}
	}
	require.Len(t, placedNodes, 2, "the placed gang's 2 pods of 8 GPUs are on 2 nodes")

	// topology: the leaf holding the placed gang, its free GPUs as the oracle says, discovery's source.
	svg := filepath.Join(t.TempDir(), "topology.svg")
	var topo topology.Report
	assert.Equal(t, exitcode.OK, decode(t, &topo, "topology", "--gang", ns+"/placed", "--svg", svg))
	require.NotNil(t, topo.Highlight)
	assert.True(t, topo.Highlight.Placed)
	assert.Len(t, topo.Domains, len(hns.Items))
	var leaf *topology.Domain
	for i, d := range topo.Domains {
		assert.NotEqual(t, topology.NoSource, d.Source, "the e2e cluster's tree is discovered")
		var want int64
		for _, n := range d.Nodes {
			want += free[n]
		}
		assert.Equal(t, want, d.AcceleratorsFree, "free GPUs of %s", d.Name)
		if d.Name == topo.Highlight.Domain {
			leaf = &topo.Domains[i]
		}
	}
	require.NotNil(t, leaf, "the highlighted domain %q is listed", topo.Highlight.Domain)
	assert.True(t, leaf.Highlight)
	assert.Contains(t, leaf.Gangs, ns+"/placed")
	for n := range placedNodes {
		assert.Contains(t, leaf.Nodes, n)
	}
	data, err := os.ReadFile(svg)
	require.NoError(t, err)
	list, err := placementsvg.Titles(data)
	require.NoError(t, err, "the SVG is well-formed XML")
	titles := "\n" + strings.Join(list, "\n") + "\n"
	for _, d := range topo.Domains {
		if len(d.Nodes) > 0 && d.Tier == 1 {
			assert.Contains(t, titles, "\n"+d.Name+"\n", "the SVG names leaf %s", d.Name)
		}
	}
	for _, g := range []string{"placed", "full", "tier"} {
		assert.Contains(t, string(data), ">"+ns+"/"+g+" (", "the SVG's legend lists %s", g)
	}
	for n := range placedNodes {
		assert.Contains(t, titles, "\n"+ns+"/placed on "+n+"\n")
	}

	// why: the gang behind the full Queue.
	var full why.Report
	assert.Equal(t, exitcode.Attention, decode(t, &full, "why", "full", "-n", ns))
	require.NotNil(t, full.Waiting)
	assert.Equal(t, "QueueCapabilityExceeded", full.Waiting.Reason)
	assert.Contains(t, full.Waiting.Message, "reserve 16, this gang's minResources 8, total 24 > capability 16")
	assert.Equal(t, map[string]string{"nvidia.com/gpu": "16"}, full.Queue.Capability)
	assert.Equal(t, map[string]string{"nvidia.com/gpu": "16"}, full.Queue.Reserved)
	require.Len(t, full.Queue.Holders, 1)
	assert.Equal(t, ns+"/placed", full.Queue.Holders[0].Gang)

	// why: the gang waiting for a tier, in the scheduler's numbers, checked against the oracle.
	var tier why.Report
	assert.Equal(t, exitcode.Attention, decode(t, &tier, "why", "pg/tier", "-n", ns))
	require.NotNil(t, tier.Placement, "the scheduler's numbers")
	p := tier.Placement
	assert.Equal(t, int64(5), p.Need.Pods)
	assert.Equal(t, "40", p.Need.Resources["nvidia.com/gpu"])
	require.NotEmpty(t, p.Tiers)
	t1 := p.Tiers[0]
	assert.True(t, t1.Allowed)
	var leafNodes []string
	for _, d := range topo.Domains {
		if d.Name == t1.Best {
			leafNodes = d.Nodes
		}
	}
	require.NotEmpty(t, leafNodes, "the best tier-1 domain %q is a HyperNode", t1.Best)
	var room, gpus int64
	for _, n := range leafNodes {
		room += free[n] / 8
		gpus += free[n]
	}
	assert.Equal(t, room, t1.BestRoom, "pods of 8 GPUs %s holds", t1.Best)
	assert.Equal(t, resource.NewQuantity(gpus, resource.DecimalSI).String(), t1.BestFree.Resources["nvidia.com/gpu"])
	assert.Less(t, t1.BestRoom, int64(5))
	assert.Equal(t, "nvidia.com/gpu", t1.Binding)
	require.Greater(t, len(p.Tiers), 1)
	assert.False(t, p.Tiers[1].Allowed)
	assert.Equal(t, gangcontract.BindingTierLimit, p.Tiers[1].Binding)
	var higher bool
	for _, s := range p.Suggestions {
		higher = higher || (s.Kind == gangcontract.SuggestHigherTier && s.Value == 2)
	}
	assert.True(t, higher, "a tier-2 HyperNode holds 5 pods of 8 GPUs: %+v", p.Suggestions)

	// why: the placed gang.
	var placed why.Report
	assert.Equal(t, exitcode.OK, decode(t, &placed, "why", "placed", "-n", ns))
	assert.Equal(t, 2, placed.Placed)
	assert.Equal(t, leaf.Name, placed.Domain)
}
