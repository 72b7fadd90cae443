package workloadpolicy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

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

// queuesCondition is the QueuesExist condition of the policy "queues".
func queuesCondition(ctx context.Context) (*metav1.Condition, error) {
	st, err := policyStatus(ctx, "queues")
	if err != nil {
		return nil, err
	}
	return apimeta.FindStatusCondition(st.Conditions, workloadpolicy.ConditionQueuesExist), nil
}

// QueuesExist warns when a cluster Queue the policy names (default or allowed) does not exist,
// naming each missing queue and its field, and follows Queues being created and deleted. The
// policy stays Ready. NamespaceQueue references ("namespace/<name>") are not looked up.
func TestQueuesExistCondition(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	there := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q-there"}}
	missing := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q-missing"}}
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "queues"}, Spec: hbv1.WorkloadPolicySpec{
		Defaults:      hbv1.PolicyDefaults{Queue: "q-missing"},
		AllowedQueues: []string{"q-there", "q-missing", "namespace/per-ns"}}}
	t.Cleanup(func() { // so the test can run again (-count)
		for _, o := range []client.Object{p, there, missing} {
			_ = c.Delete(context.Background(), o)
		}
		framework.Eventually(t, 20*time.Second, "the test's objects to be gone", func(ctx context.Context) (bool, error) {
			for _, o := range []client.Object{p, there, missing} {
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
					return false, client.IgnoreNotFound(err)
				}
			}
			return true, nil
		})
	})
	require.NoError(t, c.Create(ctx, there))
	require.NoError(t, c.Create(ctx, p))
	// The controller's Queue cache may not hold q-there yet when it first sees the policy; the
	// Queue's own event brings it round, so the wait is for the message that names only q-missing.
	want := `Volcano Queue "q-missing" (spec.defaults.queue), "q-missing" (spec.allowedQueues[1]) does not exist: ` +
		"workloads defaulted to or allowed only a missing queue wait in Pending; create the Queue (kind Queue, scheduling.volcano.sh/v1beta1) or correct the policy"
	var last string
	waitFor(t, "QueuesExist=False naming only the missing queue", func(ctx context.Context) (bool, error) {
		cond, err := queuesCondition(ctx)
		if cond != nil {
			last = cond.Message
		}
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Message == want, err
	})
	cond, err := queuesCondition(ctx)
	require.NoError(t, err)
	assert.Equal(t, workloadpolicy.ReasonQueueNotFound, cond.Reason)
	assert.Equal(t, want, cond.Message, "last message seen: %s", last)
	st, err := policyStatus(ctx, "queues")
	require.NoError(t, err)
	assert.True(t, apimeta.IsStatusConditionTrue(st.Conditions, workloadpolicy.ConditionReady), "a missing queue made the policy not Ready")

	require.NoError(t, c.Create(ctx, missing))
	waitFor(t, "QueuesExist=True once the Queue exists", func(ctx context.Context) (bool, error) {
		cond, err := queuesCondition(ctx)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == workloadpolicy.ReasonQueuesFound, err
	})

	require.NoError(t, c.Delete(ctx, there))
	waitFor(t, "QueuesExist=False again once a Queue is deleted", func(ctx context.Context) (bool, error) {
		cond, err := queuesCondition(ctx)
		return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, `"q-there" (spec.allowedQueues[0])`), err
	})
}
