package namespacelabel

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/namespacelabel"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(framework.RunControllerMain(m, &env, func(mgr manager.Manager) error {
		return namespacelabel.NewReconciler(mgr, "hyperbatch-system", "platform").SetupWithManager(mgr)
	}))
}

func labelOf(ctx context.Context, name string) (string, bool, error) {
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return "", false, err
	}
	v, ok := ns.Labels[hbv1.PodWebhookLabel]
	return v, ok, nil
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, what, cond)
}

// Governed namespaces are opted in to the Pod webhook (enabled), ungoverned ones are marked for the
// workload webhooks to skip (disabled), excluded ones (kube-system, hyperbatch's own, the manager's
// --excluded-namespaces) get neither, the label turns to disabled when the policy goes, and a label
// an administrator set by hand, either value, is left alone.
func TestGovernedNamespacesAreLabelled(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	for _, n := range []string{"gov", "other", "manual", "manual-off", "hyperbatch-system", "platform"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": "ml"}}}
		switch n {
		case "other":
			ns.Labels["team"] = "web"
		case "manual":
			ns.Labels["team"] = "web"
			ns.Labels[hbv1.PodWebhookLabel] = hbv1.PodWebhookLabelEnabled
		case "manual-off": // governed, but its administrator opted it out
			ns.Labels[hbv1.PodWebhookLabel] = hbv1.PodWebhookLabelDisabled
		}
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}}}
	var all corev1.NamespaceList
	require.NoError(t, c.List(ctx, &all))
	before, err := framework.ReconcileTotal("namespacelabel")
	require.NoError(t, err)
	require.NoError(t, c.Create(ctx, p))
	eventually(t, "namespace gov to be labelled", func(ctx context.Context) (bool, error) {
		v, _, err := labelOf(ctx, "gov")
		return v == hbv1.PodWebhookLabelEnabled, err
	})
	// The policy's creation enqueues every namespace: wait until the controller has finished at
	// least that many reconciles before checking that it left the others alone.
	eventually(t, "a reconcile of every namespace after the policy was created", func(context.Context) (bool, error) {
		n, err := framework.ReconcileTotal("namespacelabel")
		return n >= before+float64(len(all.Items)), err
	})
	v, _, err := labelOf(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, hbv1.PodWebhookLabelDisabled, v, "ungoverned namespace other")
	for _, n := range []string{"hyperbatch-system", "platform"} {
		v, ok, err := labelOf(ctx, n)
		require.NoError(t, err)
		require.False(t, ok, "excluded namespace %s labelled %q; no webhook may admit objects there", n, v)
	}
	v, _, err = labelOf(ctx, "manual-off")
	require.NoError(t, err)
	require.Equal(t, hbv1.PodWebhookLabelDisabled, v, "an administrator's opt-out was overwritten")

	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gov to be marked ungoverned", func(ctx context.Context) (bool, error) {
		v, _, err := labelOf(ctx, "gov")
		return v == hbv1.PodWebhookLabelDisabled, err
	})
	if v, _, err := labelOf(ctx, "manual"); err != nil || v != hbv1.PodWebhookLabelEnabled {
		t.Errorf("a hand-set label was changed to %q (err %v)", v, err)
	}
}

// A policy whose selector cannot be parsed might govern any namespace: while it exists no namespace
// is marked ungoverned (the workload webhooks see them all); once it is gone they are again.
func TestInvalidPolicyMarksNoNamespaceUngoverned(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unsure", Labels: map[string]string{"team": "none"}}}))
	eventually(t, "unsure to be marked ungoverned", func(ctx context.Context) (bool, error) {
		v, _, err := labelOf(ctx, "unsure")
		return v == hbv1.PodWebhookLabelDisabled, err
	})
	bad := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-selector"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team name!", Operator: metav1.LabelSelectorOpExists}}},
		AllowedQueues:     []string{"locked"}}}
	require.NoError(t, c.Create(ctx, bad))
	eventually(t, "the disabled label to go while an invalid policy exists", func(ctx context.Context) (bool, error) {
		_, ok, err := labelOf(ctx, "unsure")
		return !ok, err
	})
	require.NoError(t, c.Delete(ctx, bad))
	eventually(t, "unsure to be marked ungoverned again", func(ctx context.Context) (bool, error) {
		v, _, err := labelOf(ctx, "unsure")
		return v == hbv1.PodWebhookLabelDisabled, err
	})
}
