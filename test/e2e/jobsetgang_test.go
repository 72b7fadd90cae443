//go:build e2e

package e2e

// A JobSet of 4 replicatedJob replicas × 8 pods is one gang (hyperbatch's PodGroup, made by
// controllers/podgroup), placed by hyperbatch-scheduler inside one HyperNode of the lowest tier that
// can hold it, and, with schedulerName volcano, by Volcano's scheduler as one gang.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const (
	gangReplicas = 4
	gangPodsPer  = 8
	gangSize     = gangReplicas * gangPodsPer
	gangGPU      = builders.GPU
	gangGPUs     = 2 // per pod: 4 pods fill an 8-GPU node, so 32 pods need more than one 4-node leaf
)

// gangJobSetManifest is the 4 × 8 JobSet for scheduler, in queue, with one more JobSet annotation.
func gangJobSetManifest(t *testing.T, ns, name, scheduler, queue, annotation, value string) string {
	t.Helper()
	gpus := strconv.Itoa(gangGPUs)
	tmpl := workloadTemplate("trainer").Scheduler(scheduler).
		Request(corev1.ResourceCPU, "500m").Request(corev1.ResourceMemory, "1Gi").Request(gangGPU, gpus).Limit(gangGPU, gpus).Obj()
	m, err := builders.MakeJobSet(ns, name).Annotation(defaults.QueueNameAnnotation, queue).Annotation(annotation, value).
		ReplicatedJob("workers", gangReplicas, gangPodsPer, tmpl).Manifest()
	require.NoError(t, err)
	return m
}

// hyperNodeTree is the cluster's HyperNode tree: each HyperNode's nodes (through its descendants).
type hyperNodeTree struct {
	tier  map[string]int
	nodes map[string]map[string]bool
}

func readHyperNodeTree(t *testing.T) hyperNodeTree {
	t.Helper()
	var hns topologyv1alpha1.HyperNodeList
	require.NoError(t, c.List(context.Background(), &hns))
	byName := map[string]*topologyv1alpha1.HyperNode{}
	for i := range hns.Items {
		byName[hns.Items[i].Name] = &hns.Items[i]
	}
	tree := hyperNodeTree{tier: map[string]int{}, nodes: map[string]map[string]bool{}}
	var collect func(name string, into map[string]bool, depth int)
	collect = func(name string, into map[string]bool, depth int) {
		h := byName[name]
		require.NotNil(t, h, "HyperNode %s is listed as a member but does not exist", name)
		require.Less(t, depth, 16, "HyperNode tree deeper than 16 at %s (a cycle?)", name)
		for _, m := range h.Spec.Members {
			require.NotNil(t, m.Selector.ExactMatch, "HyperNode %s: only exactMatch members are read here", name)
			if m.Type == topologyv1alpha1.MemberTypeNode {
				into[m.Selector.ExactMatch.Name] = true
			} else {
				collect(m.Selector.ExactMatch.Name, into, depth+1)
			}
		}
	}
	for name, h := range byName {
		tree.tier[name] = h.Spec.Tier
		tree.nodes[name] = map[string]bool{}
		collect(name, tree.nodes[name], 0)
	}
	return tree
}

// podsThatFit is, per node, how many more gang pods (gangGPUs GPUs each) fit beside the
// non-terminal pods bound to it.
func podsThatFit(t *testing.T) map[string]int {
	t.Helper()
	var nodes corev1.NodeList
	require.NoError(t, c.List(context.Background(), &nodes))
	var pods corev1.PodList
	require.NoError(t, c.List(context.Background(), &pods))
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			q := ctr.Resources.Requests[gangGPU]
			used[p.Spec.NodeName] += q.Value()
		}
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		alloc := n.Status.Allocatable[gangGPU]
		out[n.Name] = int((alloc.Value() - used[n.Name]) / gangGPUs)
	}
	return out
}

// lowestFeasibleTier is the lowest tier with a HyperNode whose nodes hold the whole gang now.
func lowestFeasibleTier(t *testing.T, tree hyperNodeTree, fit map[string]int) int {
	t.Helper()
	best := 0
	for name, nodes := range tree.nodes {
		room := 0
		for n := range nodes {
			room += fit[n]
		}
		if room >= gangSize && (best == 0 || tree.tier[name] < best) {
			best = tree.tier[name]
		}
	}
	require.NotZero(t, best, "no HyperNode can hold %d pods of %d GPUs (room per node: %v)", gangSize, gangGPUs, fit)
	return best
}

// waitGangBound waits until the JobSet's 32 pods exist and are bound, and returns their nodes.
func waitGangBound(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	e2efw.Poll(t, 4*time.Minute, fmt.Sprintf("the %d pods of JobSet %s to be bound", gangSize, name), func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return len(pods.Items) == gangSize && bound == gangSize, nil
	})
	return pods.Items
}

// waitGangPodGroup waits for the JobSet's PodGroup (controllers/podgroup's) and returns it.
func waitGangPodGroup(t *testing.T, ns, name string) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg := &schedulingv1beta1.PodGroup{}
	e2efw.Poll(t, 60*time.Second, fmt.Sprintf("the JobSet's PodGroup with minMember %d", gangSize), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
		return err == nil && pg.Spec.MinMember == gangSize, client.IgnoreNotFound(err)
	})
	require.NotNil(t, pg.Spec.MinResources)
	gpus := (*pg.Spec.MinResources)[gangGPU]
	assert.Equal(t, int64(gangSize*gangGPUs), gpus.Value(), "PodGroup minResources %s", gangGPU)
	assert.Len(t, pg.OwnerReferences, 1)
	return pg
}

// hyperbatch-scheduler places the 4 × 8 JobSet inside one HyperNode of the lowest tier that can
// hold 32 pods of 2 GPUs, read from the HyperNode tree and the nodes' free GPUs before it is created.
func TestJobSetGangInOneHyperNode(t *testing.T) {
	e2efw.SkipUnlessSimulated(t, "32 pods of 2 GPUs each on 8-GPU nodes, 4 per leaf HyperNode")
	ns := primary.Namespace(t)
	queue := "gang-" + ns
	openQueue(t, queue)
	tree := readHyperNodeTree(t)
	tier := lowestFeasibleTier(t, tree, podsThatFit(t))

	// networkTopology {mode: hard} with no tier: one HyperNode, of whichever tier holds the gang.
	manifest := writeManifest(t, gangJobSetManifest(t, ns, "gang", "hyperbatch-scheduler", queue, defaults.NetworkTopologyModeAnnotation, "hard"))
	out, err := primary.Kubectl("apply", "-f", manifest)
	require.NoError(t, err, "kubectl apply: %s", out)
	t.Cleanup(func() { _, _ = primary.Kubectl("delete", "-f", manifest, "--wait=false") })
	waitGangPodGroup(t, ns, "gang")
	pods := waitGangBound(t, ns, "gang")

	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		assert.Equal(t, "gang", p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in the gang", p.Name)
	}
	var holders []string
	for name, members := range tree.nodes {
		if tree.tier[name] != tier {
			continue
		}
		inside := true
		for n := range nodes {
			inside = inside && members[n]
		}
		if inside {
			holders = append(holders, name)
		}
	}
	sort.Strings(holders)
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	assert.Len(t, holders, 1, "the gang's nodes %v must lie inside one tier-%d HyperNode (the lowest feasible tier); inside: %v", names, tier, holders)
	waitScheduledBy(t, ns, "hyperbatch-scheduler", gangSize)
	t.Logf("32 pods on %d nodes inside %v (tier %d)", len(names), holders, tier)
}

// The same JobSet with schedulerName volcano: Volcano's scheduler places the 32 pods as one gang, the
// PodGroup made by controllers/podgroup. All or nothing: while the JobSet asks for a gang of 33
// (Volcano's group-min-member annotation), Volcano's scheduler marks the PodGroup Unschedulable and
// binds none of the 32 pods; once the annotation is removed the PodGroup says 32 and all are bound.
func TestJobSetGangOnVolcanoScheduler(t *testing.T) {
	e2efw.SkipUnlessSimulated(t, "32 pods of 2 GPUs each on 8-GPU nodes, 4 per leaf HyperNode")
	vs := startVolcanoScheduler(t)
	ns := primary.Namespace(t)
	queue := "gang-" + ns
	openQueue(t, queue)

	manifest := writeManifest(t, gangJobSetManifest(t, ns, "gang", "volcano", queue, minMemberAnnotation, "33"))
	out, err := primary.Kubectl("apply", "-f", manifest)
	require.NoError(t, err, "kubectl apply: %s", out)
	t.Cleanup(func() { _, _ = primary.Kubectl("delete", "-f", manifest, "--wait=false") })

	pg := &schedulingv1beta1.PodGroup{}
	var pods corev1.PodList
	var why string
	e2efw.Poll(t, 2*time.Minute, "all 32 pods, and Volcano's scheduler to find the gang of 33 unschedulable", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gang"}, pg); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "gang"}); err != nil {
			return false, err
		}
		for _, cond := range pg.Status.Conditions {
			// Both timestamps have whole-second resolution, so the condition may carry the second of the
			// last pod's creation; Volcano's own count in its message says it judged all 32 pods.
			if cond.Type == schedulingv1beta1.PodGroupUnschedulableType && cond.Status == corev1.ConditionTrue &&
				!cond.LastTransitionTime.Time.Before(latestCreation(pods.Items)) && strings.Contains(cond.Message, fmt.Sprintf("%d Pending", gangSize)) {
				why = cond.Reason + ": " + cond.Message
				return pg.Spec.MinMember == gangSize+1 && len(pods.Items) == gangSize, nil
			}
		}
		return false, nil
	})
	t.Logf("Volcano's scheduler on the gang of 33 with 32 pods: %s", why)
	for _, p := range pods.Items {
		assert.Empty(t, p.Spec.NodeName, "pod %s bound while its gang of 33 cannot be complete", p.Name)
	}

	out, err = primary.Kubectl("annotate", "jobset", "gang", "-n", ns, minMemberAnnotation+"-")
	require.NoError(t, err, "kubectl annotate: %s", out)
	pg = waitGangPodGroup(t, ns, "gang")
	assert.Equal(t, queue, pg.Spec.Queue)
	waitGangBound(t, ns, "gang")
	require.False(t, vs.Exited(), "vc-scheduler exited.\n%s", vs.LogTail(40))
	waitScheduledBy(t, ns, "volcano", gangSize)
}

// latestCreation is the newest creationTimestamp of pods (the zero time for none).
func latestCreation(pods []corev1.Pod) time.Time {
	var last time.Time
	for _, p := range pods {
		if p.CreationTimestamp.After(last) {
			last = p.CreationTimestamp.Time
		}
	}
	return last
}

// minMemberAnnotation is Volcano's minMember override, read on the JobSet by controllers/podgroup.
const minMemberAnnotation = schedulingv1beta1.VolcanoGroupMinMemberAnnotationKey
