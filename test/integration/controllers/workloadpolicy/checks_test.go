package workloadpolicy

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/workloadpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func condition(ctx context.Context, policy, typ string) (*metav1.Condition, *hbv1.WorkloadPolicy, error) {
	var p hbv1.WorkloadPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Name: policy}, &p); err != nil {
		return nil, nil, err
	}
	return apimeta.FindStatusCondition(p.Status.Conditions, typ), &p, nil
}

// A policy whose default PriorityClass does not exist is Ready=False with the reason, and the
// defaulting engine, reading that status, fills its other defaults but not the class (with it every
// Pod of its namespaces would be refused). Once the PriorityClass exists the policy is Ready and the
// class is filled again; deleting it turns the policy not Ready again.
func TestMissingPriorityClassMakesPolicyNotReady(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pc-missing"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "pc-missing"}},
		Defaults:          hbv1.PolicyDefaults{Queue: "pc-q", PriorityClassName: "batch-hgih"}}}
	require.NoError(t, c.Create(ctx, p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	want := `PriorityClass "batch-hgih" (spec.defaults.priorityClassName) does not exist`
	var got *hbv1.WorkloadPolicy
	waitFor(t, "Ready=False, PriorityClassNotFound", func(ctx context.Context) (bool, error) {
		cond, pol, err := condition(ctx, p.Name, workloadpolicy.ConditionReady)
		got = pol
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == workloadpolicy.ReasonPriorityClassNotFound &&
			strings.Contains(cond.Message, want) && cond.ObservedGeneration == p.Generation, err
	})
	pods := func(pol *hbv1.WorkloadPolicy) *corev1.Pod {
		pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{*pol})
		require.NoError(t, err)
		pod := &corev1.Pod{}
		defaults.Pod(pod, defaults.Namespace{Name: "ml", Labels: map[string]string{"team": "pc-missing"}}, pols)
		return pod
	}
	pod := pods(got)
	assert.Empty(t, pod.Spec.PriorityClassName, "the engine filled a PriorityClass that does not exist")
	assert.Equal(t, "pc-q", pod.Annotations[defaults.QueueNameAnnotation], "the policy's other defaults were left out too")

	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-hgih"}, Value: 100}
	require.NoError(t, c.Create(ctx, pc))
	waitFor(t, "Ready=True once the PriorityClass exists", func(ctx context.Context) (bool, error) {
		cond, pol, err := condition(ctx, p.Name, workloadpolicy.ConditionReady)
		got = pol
		return cond != nil && cond.Status == metav1.ConditionTrue, err
	})
	assert.Equal(t, "batch-hgih", pods(got).Spec.PriorityClassName)

	require.NoError(t, c.Delete(ctx, pc))
	waitFor(t, "Ready=False again once the PriorityClass is deleted", func(ctx context.Context) (bool, error) {
		cond, _, err := condition(ctx, p.Name, workloadpolicy.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == workloadpolicy.ReasonPriorityClassNotFound, err
	})
}

// Two policies of the same weight select one namespace: the smaller name governs it, and the other
// says so in a WeightTie condition naming the winner. Raising the loser's weight ends the tie.
func TestEqualWeightTieNamesTheWinner(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tie-ml", Labels: map[string]string{"tie": "yes"}}}))
	mk := func(name string) *hbv1.WorkloadPolicy {
		p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hbv1.WorkloadPolicySpec{Weight: 10,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tie": "yes"}},
			Defaults:          hbv1.PolicyDefaults{Queue: name}}}
		require.NoError(t, c.Create(ctx, p))
		t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
		return p
	}
	mk("tie-a")
	loser := mk("tie-b")
	waitFor(t, "tie-b WeightTie=True naming tie-a", func(ctx context.Context) (bool, error) {
		cond, _, err := condition(ctx, "tie-b", workloadpolicy.ConditionWeightTie)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == workloadpolicy.ReasonLosesTie &&
			strings.Contains(cond.Message, `WorkloadPolicy "tie-a" governs namespace tie-ml: same weight 10`), err
	})
	waitFor(t, "tie-a WeightTie=False", func(ctx context.Context) (bool, error) {
		cond, _, err := condition(ctx, "tie-a", workloadpolicy.ConditionWeightTie)
		return cond != nil && cond.Status == metav1.ConditionFalse, err
	})
	cond, _, err := condition(ctx, "tie-b", workloadpolicy.ConditionReady)
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionTrue, cond.Status, "a tie is not invalidity")

	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "tie-b"}, loser))
	loser.Spec.Weight = 20
	require.NoError(t, c.Update(ctx, loser))
	waitFor(t, "tie-b WeightTie=False once it weighs more", func(ctx context.Context) (bool, error) {
		cond, _, err := condition(ctx, "tie-b", workloadpolicy.ConditionWeightTie)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.ObservedGeneration == loser.Generation, err
	})
	// tie-a now loses to a heavier policy: not a tie, so no WeightTie.
	cond, _, err = condition(ctx, "tie-a", workloadpolicy.ConditionWeightTie)
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
}
