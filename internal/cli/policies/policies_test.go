package policies_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/policies"
)

// The recorded cluster: team-a governs default; ml-a and ml-b (weight 5 each) both match ml, and
// everyone (weight 0) is outranked there; everyone names a Queue that does not exist.
func TestRecordedCluster(t *testing.T) {
	r := policies.Build(clitest.Recorded(t, "localcluster.yaml"))
	byName := map[string]policies.Policy{}
	for _, p := range r.Policies {
		byName[p.Name] = p
	}
	require.Len(t, byName, 4)
	assert.Equal(t, []string{"default"}, byName["team-a"].Governs)
	assert.Equal(t, []string{"ml"}, byName["ml-a"].Governs)
	assert.Empty(t, byName["ml-b"].Governs)
	assert.Equal(t, []string{"ml"}, byName["ml-b"].Outranked)
	assert.Equal(t, []string{"ml"}, byName["everyone"].Outranked)
	assert.Equal(t, []policies.Conflict{{Namespace: "ml", Weight: 5, Governing: "ml-a", Tied: []string{"ml-b"}}}, r.Conflicts)
	require.Len(t, r.NotReady, 1)
	assert.Equal(t, policies.NotReady{Policy: "everyone", Condition: "QueuesExist", Status: "False", Reason: "QueueNotFound",
		Message: r.NotReady[0].Message}, r.NotReady[0])
	assert.Contains(t, r.NotReady[0].Message, `Volcano Queue "archive"`)
	assert.True(t, r.NeedsAttention())
	for _, f := range []output.Format{output.Table, output.JSON, output.YAML} {
		clitest.Render(t, "policies", f, r)
	}
}

// A policy whose selector cannot be parsed governs nothing; a status the controller has not
// written for the current generation is reported as such.
func TestInvalidAndUnobserved(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	bad := hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad", Generation: 2},
		Spec:   hbv1.WorkloadPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "in"}}}},
		Status: hbv1.WorkloadPolicyStatus{ObservedGeneration: 1}}
	s.Policies = append(s.Policies, bad)
	r := policies.Build(s)
	for _, p := range r.Policies {
		if p.Name == "bad" {
			assert.Empty(t, p.Governs)
			assert.Empty(t, p.Outranked)
		}
	}
	assert.Contains(t, r.NotReady, policies.NotReady{Policy: "bad", Condition: "Ready", Status: "Unknown", Reason: "NotObserved",
		Message: "the workloadpolicy controller has not written the status of generation 2 yet (observed 1); is hyperbatch-manager running?"})
}

func TestNoPolicies(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	s.Policies = nil
	r := policies.Build(s)
	assert.False(t, r.NeedsAttention())
	clitest.Render(t, "policies-none", output.Table, r)
}

// WeightTie is the one condition whose True needs attention: the winner of a tie (WeightTie=False,
// NoTie) is not reported, the loser (WeightTie=True) is.
func TestWeightTieNeedsAttentionOnlyWhenTrue(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: hbv1.PolicyConditionWeightTie, Status: status, Reason: reason, Message: reason}}
	}
	s.Policies = append(s.Policies,
		hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tie-winner", Generation: 1},
			Status: hbv1.WorkloadPolicyStatus{ObservedGeneration: 1, Conditions: cond(metav1.ConditionFalse, "NoTie")}},
		hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tie-loser", Generation: 1},
			Status: hbv1.WorkloadPolicyStatus{ObservedGeneration: 1, Conditions: cond(metav1.ConditionTrue, "LosesTieByName")}})
	r := policies.Build(s)
	var names []string
	for _, n := range r.NotReady {
		names = append(names, n.Policy)
	}
	assert.NotContains(t, names, "tie-winner")
	assert.Contains(t, names, "tie-loser")
}
