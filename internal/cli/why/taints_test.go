package why_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
)

var infra = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

// tainted is the recorded cluster with the named nodes (all when none) tainted dedicated=infra:NoSchedule.
func tainted(t *testing.T, nodes ...string) *snapshot.Snapshot {
	s := clitest.Recorded(t, "localcluster.yaml")
	for i := range s.Nodes {
		if len(nodes) == 0 || strings.Contains(" "+strings.Join(nodes, " ")+" ", " "+s.Nodes[i].Name+" ") {
			s.Nodes[i].Spec.Taints = append(s.Nodes[i].Spec.Taints, infra)
		}
	}
	return s
}

// A gang held off its best domain by a taint: why names the taint, its nodes and the toleration
// that would admit the pods (issue 38: it gave numbers only).
func TestTaintOnTheBestDomain(t *testing.T) {
	s := tainted(t, "kwok-node-04", "kwok-node-05", "kwok-node-06")
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	r := why.Build(s, pg, owner, now(t))
	require.Len(t, r.Taints, 1)
	assert.Equal(t, "leaf-1", r.TaintsIn, "the scheduler's best tier-1 domain")
	assert.Equal(t, 4, r.TaintsInNodes)
	assert.Equal(t, []string{"kwok-node-04", "kwok-node-05", "kwok-node-06"}, r.Taints[0].Nodes)
	assert.Contains(t, r.Changes, "tolerate dedicated=infra:NoSchedule (on 3 of the 4 nodes of leaf-1): "+
		"add the toleration {key: dedicated, operator: Equal, value: infra, effect: NoSchedule} to the pods' spec.tolerations")
	clitest.Render(t, "why-taint", output.Table, r)

	// The pods tolerate it: nothing to say.
	for i := range s.Pods {
		s.Pods[i].Spec.Tolerations = append(s.Pods[i].Spec.Tolerations,
			corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
	}
	r = why.Build(s, pg, owner, now(t))
	assert.Empty(t, r.Taints)
}

// Every node tainted: why names the taint on the whole of the best domain, and says nothing of a
// pod too big for the nodes.
func TestEveryNodeTainted(t *testing.T) {
	s := tainted(t)
	pg, owner, err := why.Resolve(s, "ml", "cap-b")
	require.NoError(t, err)
	r := why.Build(s, pg, owner, now(t))
	require.Len(t, r.Taints, 1)
	assert.Equal(t, "the cluster", r.TaintsIn, "no placement numbers: the whole cluster")
	assert.Equal(t, 16, r.TaintsInNodes)
	assert.Len(t, r.Taints[0].Nodes, 16)
	var buf strings.Builder
	require.NoError(t, output.Print(&buf, output.Table, r))
	assert.Contains(t, buf.String(), "Taints keep the gang's pods off 16 of the 16 nodes of the cluster:")
	assert.NotContains(t, buf.String(), "larger than any node")
	assert.NotContains(t, buf.String(), "more than any node")
}

// A node whose kubelet stopped: why says to wait for it to be Ready again, and never suggests
// tolerating the node controller's unreachable taint (the scheduler's message says the same).
func TestNotReadyNodeIsWaitedFor(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	for i := range s.Nodes {
		if s.Nodes[i].Name == "kwok-node-04" {
			s.Nodes[i].Spec.Taints = append(s.Nodes[i].Spec.Taints,
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	r := why.Build(s, pg, owner, now(t))
	require.Len(t, r.Taints, 1)
	assert.Contains(t, r.Changes, "wait for kwok-node-04 to be Ready (node.kubernetes.io/unreachable:NoSchedule on 1 of the 4 nodes of leaf-1): "+
		"the node controller's taint: the node's kubelet stopped reporting (Ready=Unknown); it is lifted when the node is Ready again")
	for _, c := range r.Changes {
		assert.NotContains(t, c, "tolerate node.kubernetes.io/unreachable")
	}
}
