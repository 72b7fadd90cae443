package topology_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/cli/topology"
)

const tooBig = "default/too-big-261fcdf7-eec2-482c-b52c-684c29867029"

var infra = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

// taintLeaf1 is the recorded cluster with leaf-1's four empty nodes tainted dedicated=infra:NoSchedule.
func taintLeaf1(t *testing.T) *snapshot.Snapshot {
	s := clitest.Recorded(t, "localcluster.yaml")
	for i := range s.Nodes {
		switch s.Nodes[i].Name {
		case "kwok-node-04", "kwok-node-05", "kwok-node-06", "kwok-node-07":
			s.Nodes[i].Spec.Taints = append(s.Nodes[i].Spec.Taints, infra)
		}
	}
	return s
}

func domains(r *topology.Report) map[string]topology.Domain {
	out := map[string]topology.Domain{}
	for _, d := range r.Domains {
		out[d.Name] = d
	}
	return out
}

// Tainted nodes are not free for a gang that does not tolerate the taint (issue 38: topology
// counted them free), and are for one that does.
func TestTaintedNodesAreNotFree(t *testing.T) {
	r := topology.Build(taintLeaf1(t), topology.Options{})
	d := domains(r)
	assert.Equal(t, int64(32), d["leaf-1"].AcceleratorsAllocatable)
	assert.Equal(t, int64(0), d["leaf-1"].AcceleratorsFree, "no pod without a toleration may use leaf-1")
	assert.Equal(t, int64(0), d["leaf-1"].CPUFreeMilli)
	assert.Equal(t, 4, d["leaf-1"].UntoleratedNodes)
	assert.Equal(t, int64(0), d["spine-0"].AcceleratorsFree, "leaf-0 is full and leaf-1 tainted")
	assert.Equal(t, int64(96-32), d["top"].AcceleratorsFree)
	require.Len(t, r.Untolerated, 1)
	assert.Equal(t, "dedicated=infra:NoSchedule", r.Untolerated[0].String())
	assert.Equal(t, []string{"kwok-node-04", "kwok-node-05", "kwok-node-06", "kwok-node-07"}, r.Untolerated[0].Nodes)
	assert.Equal(t, "a pod without tolerations", r.TolerationsOf)

	// The waiting gang's pods, given the toleration, may use leaf-1 again.
	s := taintLeaf1(t)
	for i := range s.Pods {
		if s.Pods[i].Annotations[topology.GroupNameAnnotation] == "too-big-261fcdf7-eec2-482c-b52c-684c29867029" {
			s.Pods[i].Spec.Tolerations = append(s.Pods[i].Spec.Tolerations,
				corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule})
		}
	}
	tolerant := topology.Build(s, topology.Options{Gang: tooBig})
	assert.Equal(t, int64(32), domains(tolerant)["leaf-1"].AcceleratorsFree)
	assert.Empty(t, tolerant.Untolerated)
	assert.Equal(t, "the pods of "+tooBig, tolerant.TolerationsOf)

	r = topology.Build(taintLeaf1(t), topology.Options{Gang: tooBig})
	assert.Equal(t, int64(0), domains(r)["leaf-1"].AcceleratorsFree, "too-big's pods do not tolerate it")
	clitest.Render(t, "topology-tainted", output.Table, r)
}

// --gang on a waiting gang marks the scheduler's candidate domain, the best domain of the lowest
// allowed tier in its hyperbatch.dev/placement annotation (what `why` shows), instead of
// "nowhere yet" (issue 38).
func TestGangWaitingMarksSchedulerCandidate(t *testing.T) {
	r := topology.Build(clitest.Recorded(t, "localcluster.yaml"), topology.Options{Gang: tooBig})
	require.NotNil(t, r.Highlight)
	assert.False(t, r.Highlight.Placed)
	assert.Equal(t, "leaf-1", r.Highlight.Domain)
	assert.True(t, domains(r)["leaf-1"].Highlight)
	assert.Contains(t, r.Highlight.Note, "room for 4 of the 5 pods still to place, bound by nvidia.com/gpu")
	clitest.Render(t, "topology-waiting", output.Table, r)
}
