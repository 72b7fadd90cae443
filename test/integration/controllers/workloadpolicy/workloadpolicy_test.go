package workloadpolicy

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/workloadpolicy"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(framework.RunControllerMain(m, &env, func(mgr manager.Manager) error {
		return workloadpolicy.NewReconciler(mgr).SetupWithManager(mgr)
	}))
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, what, cond)
}

func policyStatus(ctx context.Context, name string) (hbv1.WorkloadPolicyStatus, error) {
	var p hbv1.WorkloadPolicy
	err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &p)
	return p.Status, err
}

// The status counts the namespaces the selector matches, follows namespace label changes, and says
// Ready=False with the reason when the selector is invalid.
func TestPolicyStatusFollowsNamespaces(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	for _, n := range []string{"ml-1", "ml-2", "web"} {
		team := "ml"
		if n == "web" {
			team = "web"
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": team}}}); err != nil {
			t.Fatal(err)
		}
	}
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}},
		Defaults:          hbv1.PolicyDefaults{Queue: "ml"}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 matching namespaces and Ready", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, "ml")
		return err == nil && st.MatchingNamespaces == 2 && apimeta.IsStatusConditionTrue(st.Conditions, workloadpolicy.ConditionReady) &&
			st.ObservedGeneration == p.Generation, err
	})

	// Relabel "web" into the ml team: the count follows.
	var web corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "web"}, &web); err != nil {
		t.Fatal(err)
	}
	web.Labels["team"] = "ml"
	if err := c.Update(ctx, &web); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 matching namespaces", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, "ml")
		return err == nil && st.MatchingNamespaces == 3, err
	})

	// A label key the CRD's schema does not check (operators it does): Ready=False naming the field.
	bad := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-selector"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team name!", Operator: metav1.LabelSelectorOpExists}}}}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Ready=False on the invalid selector", func(ctx context.Context) (bool, error) {
		st, err := policyStatus(ctx, "bad-selector")
		if err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(st.Conditions, workloadpolicy.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "InvalidNamespaceSelector", nil
	})
}
