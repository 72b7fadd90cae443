//go:build e2e

package e2e

// The JobSet examples of examples/subgroups, applied with kubectl as they are published, on the
// local cluster's kwok nodes (8 GPUs each, 4 per leaf HyperNode, 2 leaves per spine): the PodGroup
// controllers/podgroup makes gets the sub-groups the JobSet's annotations ask for, and
// hyperbatch-scheduler puts each sub-group of 4 pods (a whole node each) inside one leaf and the
// gang of 8 inside one spine.

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	itframework "github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// insideOne is the HyperNodes of tier that hold every one of nodes.
func insideOne(tree hyperNodeTree, tier int, nodes map[string]bool) []string {
	var out []string
	for name, members := range tree.nodes {
		if tree.tier[name] != tier {
			continue
		}
		all := true
		for n := range nodes {
			all = all && members[n]
		}
		if all {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestSubGroupJobSetExamples(t *testing.T) {
	e2efw.SkipUnlessSimulated(t, "8 pods of 8 GPUs each on 8-GPU nodes, 4 per leaf HyperNode, 2 leaves per spine")
	ensureQueue(t, "default") // the examples name no queue: the PodGroup's is Volcano's default
	tree := readHyperNodeTree(t)
	for _, tc := range []struct {
		file, name string
		policies   []string
		part       func(corev1.Pod) string
	}{
		{"jobset-by-replica.yaml", "tp-by-replica", []string{"workers"}, func(p corev1.Pod) string { return "Job " + p.Labels[jobsetv1alpha2.JobIndexKey] }},
		{"jobset-by-pods.yaml", "tp-by-pods", []string{"workers-c0", "workers-c1"}, func(p corev1.Pod) string {
			i, _ := strconv.Atoi(p.Labels[batchv1.JobCompletionIndexAnnotation])
			return fmt.Sprintf("completion indexes %d-%d", i/4*4, i/4*4+3)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := primary.Namespace(t)
			file := filepath.Join(itframework.RepoRoot(), "examples", "subgroups", tc.file)
			out, err := primary.Kubectl("apply", "-n", ns, "-f", file)
			require.NoError(t, err, "kubectl apply: %s", out)
			t.Cleanup(func() { _, _ = primary.Kubectl("delete", "-n", ns, "-f", file, "--wait=false") })

			pg := &schedulingv1beta1.PodGroup{}
			e2efw.Poll(t, 60*time.Second, "the PodGroup of "+tc.name+" with its subGroupPolicy", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.name}, pg)
				return err == nil && len(pg.Spec.SubGroupPolicy) == len(tc.policies), client.IgnoreNotFound(err)
			})
			for i, p := range pg.Spec.SubGroupPolicy {
				assert.Equal(t, tc.policies[i], p.Name)
				assert.Equal(t, int32(4), *p.SubGroupSize)
				require.NotNil(t, p.NetworkTopology)
				assert.Equal(t, 1, *p.NetworkTopology.HighestTierAllowed)
			}

			var pods corev1.PodList
			e2efw.Poll(t, 4*time.Minute, "the 8 pods of "+tc.name+" to be bound", func(ctx context.Context) (bool, error) {
				if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: tc.name}); err != nil {
					return false, err
				}
				bound := 0
				for _, p := range pods.Items {
					if p.Spec.NodeName != "" {
						bound++
					}
				}
				return len(pods.Items) == 8 && bound == 8, nil
			})
			parts, all := map[string]map[string]bool{}, map[string]bool{}
			for _, p := range pods.Items {
				k := tc.part(p)
				if parts[k] == nil {
					parts[k] = map[string]bool{}
				}
				parts[k][p.Spec.NodeName] = true
				all[p.Spec.NodeName] = true
			}
			require.Len(t, parts, 2)
			for k, nodes := range parts {
				assert.Len(t, insideOne(tree, 1, nodes), 1, "%s of %s: nodes %v are not inside one leaf (tier 1)", k, tc.name, nodes)
			}
			spines := insideOne(tree, 2, all)
			assert.Len(t, spines, 1, "the gang %s is not inside one spine (tier 2): %v", tc.name, all)
			waitScheduledBy(t, ns, "hyperbatch-scheduler", 8)
			t.Logf("%s: sub-groups %v inside %v", tc.name, parts, spines)
		})
	}
}
