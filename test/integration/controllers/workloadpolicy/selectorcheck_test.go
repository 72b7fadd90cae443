package workloadpolicy

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// The WorkloadPolicy selector check is a ValidatingAdmissionPolicy: no webhook serves this suite
// (as with the manager down), yet a selector that could not be applied is refused, naming the fix.
// The binding here selects only this test's policies (label hb-test=selector-check), so the other
// tests may still store invalid selectors.
func TestSelectorCheckHoldsWithoutWebhook(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	pol, bind := webhook.WorkloadPolicyCheck()
	mark := map[string]string{"hb-test": "selector-check"}
	bind.Spec.MatchResources = &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: mark}}
	require.NoError(t, c.Create(ctx, pol))
	require.NoError(t, c.Create(ctx, bind))
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), bind)
		_ = c.Delete(context.Background(), pol)
	})
	policy := func(name string, sel *metav1.LabelSelector) *hbv1.WorkloadPolicy {
		return &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: mark}, Spec: hbv1.WorkloadPolicySpec{NamespaceSelector: sel}}
	}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	// Positive signal first: the apiserver has the policy and binding (they take effect asynchronously).
	waitFor(t, "the selector check to refuse operator 'in'", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, policy("sel-lower", expr("team", "in", "ml")))
		if err == nil {
			return false, c.Delete(ctx, policy("sel-lower", nil))
		}
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), `operator "in" is not one of In, NotIn, Exists, DoesNotExist`), nil
	})
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want string
	}{
		{"sel-bogus", expr("team", "Bogus", "ml"), `operator "Bogus" is not one of In, NotIn, Exists, DoesNotExist`},
		{"sel-novalues", expr("team", metav1.LabelSelectorOpIn), `key "team": operators In and NotIn need at least one value`},
		{"sel-values", expr("team", metav1.LabelSelectorOpExists, "ml"), `key "team": operators Exists and DoesNotExist take no values`},
		{"sel-key", &metav1.LabelSelector{MatchLabels: map[string]string{"team name": "ml"}}, "a label key is invalid"},
		{"sel-value", expr("team", metav1.LabelSelectorOpIn, "m l"), "a label value is invalid"},
	} {
		err := c.Create(ctx, policy(tc.name, tc.sel))
		require.Error(t, err, "%s was stored", tc.name)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", tc.name, err)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Contains(t, err.Error(), "spec.namespaceSelector", tc.name)
	}
	ok := policy("sel-ok", &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/team": "ml"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web", ""}},
			{Key: "gpu", Operator: metav1.LabelSelectorOpExists}}})
	require.NoError(t, c.Create(ctx, ok))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ok) })
	// A merge patch (an UPDATE to admission) without the resourceVersion: the workloadpolicy
	// controller may write the status between the create and this update.
	before := ok.DeepCopy()
	ok.Spec.Weight = 5
	require.NoError(t, c.Patch(ctx, ok, client.MergeFrom(before)), "an update that keeps a valid selector")
}
