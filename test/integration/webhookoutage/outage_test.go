// Package webhookoutage tests what a hyperbatch outage does to the cluster: the webhook
// configurations (failurePolicy Fail for workloads) stay installed while the manager, and with it
// the webhook server and the namespacelabel controller, is stopped.
package webhookoutage

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclientset "volcano.sh/apis/pkg/client/clientset/versioned"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/namespacelabel"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

var w *framework.WebhookEnv

func TestMain(m *testing.M) {
	var err error
	w, err = framework.StartWithWebhooks(framework.WebhookEnvOptions{
		Fixtures: []client.Object{builders.MakePolicy("team-a").Selector("team", "a").Queue("team-a").AllowedQueues("team-a").Obj()},
		Register: func(mgr manager.Manager) error {
			return namespacelabel.NewReconciler(mgr, "hyperbatch-system").SetupWithManager(mgr)
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane with webhooks did not start: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	w.Stop()
	os.Exit(code)
}

func podGroup(ns, name, queue string) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1, Queue: queue}}
}

func nsLabel(ctx context.Context, name string) (string, error) {
	var ns corev1.Namespace
	err := w.Client.Get(ctx, client.ObjectKey{Name: name}, &ns)
	return ns.Labels[hbv1.PodWebhookLabel], err
}

// While hyperbatch is down, Volcano keeps working: its scheduler's PodGroup status writes (a plain
// Update of the whole object, the PodGroup CRD has no status subresource) pass in every namespace,
// governed or not, and so does a PodGroup CREATE in a namespace no policy governs. What hyperbatch
// guards still fails closed: a CREATE, or a change of spec.queue, in a governed namespace, and a
// CREATE in a namespace the namespacelabel controller has not judged yet.
func TestOutageDoesNotStallVolcano(t *testing.T) {
	ctx := context.Background()
	c := w.Client
	require.NoError(t, c.Create(ctx, builders.Namespace("gov", map[string]string{"team": "a"}, nil)))
	require.NoError(t, c.Create(ctx, builders.Namespace("free", map[string]string{"team": "web"}, nil)))
	framework.Eventually(t, 30*time.Second, "the namespacelabel controller to judge gov and free", func(ctx context.Context) (bool, error) {
		g, err := nsLabel(ctx, "gov")
		if err != nil {
			return false, err
		}
		f, err := nsLabel(ctx, "free")
		return g == hbv1.PodWebhookLabelEnabled && f == hbv1.PodWebhookLabelDisabled, err
	})

	// hyperbatch is up: the governed PodGroup is defaulted, the ungoverned one is not touched.
	gov := podGroup("gov", "pg", "")
	require.NoError(t, c.Create(ctx, gov))
	require.Equal(t, "team-a", gov.Spec.Queue, "the PodGroup webhook is not active")
	free := podGroup("free", "pg", "")
	require.NoError(t, c.Create(ctx, free))
	require.Empty(t, free.Annotations[hbv1.DefaultedByAnnotation])

	// Two more for Volcano's own scheduler to judge once hyperbatch is down.
	for _, ns := range []string{"gov", "free"} {
		require.NoError(t, c.Create(ctx, podGroup(ns, "pg-vc", "")))
	}
	for _, q := range []string{"team-a", "default"} {
		require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q},
			Spec: schedulingv1beta1.QueueSpec{Weight: 1}})))
	}

	w.StopManager()
	// A positive signal that the webhook server is down: a governed CREATE is refused for it.
	framework.Eventually(t, 30*time.Second, "a governed PodGroup CREATE to fail on the stopped webhook", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, podGroup("gov", "probe", "team-a"))
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	})

	// Volcano's scheduler writes PodGroup status with its own clientset's Update.
	vc, err := vcclientset.NewForConfig(w.Config)
	require.NoError(t, err)
	for _, ns := range []string{"gov", "free"} {
		pg, err := vc.SchedulingV1beta1().PodGroups(ns).Get(ctx, "pg", metav1.GetOptions{})
		require.NoError(t, err)
		pg.Status.Phase = schedulingv1beta1.PodGroupInqueue
		pg.Status.Conditions = append(pg.Status.Conditions, schedulingv1beta1.PodGroupCondition{Type: schedulingv1beta1.PodGroupScheduled,
			Status: corev1.ConditionFalse, Reason: "NotEnoughResources", Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()})
		updated, err := vc.SchedulingV1beta1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		require.NoError(t, err, "a status write in %s stalled on the stopped webhook", ns)
		assert.Equal(t, schedulingv1beta1.PodGroupInqueue, updated.Status.Phase)

		// Labels and finalizers are not ours either.
		updated.Labels = map[string]string{"volcano.sh/touched": "yes"}
		_, err = vc.SchedulingV1beta1().PodGroups(ns).Update(ctx, updated, metav1.UpdateOptions{})
		require.NoError(t, err, "a label change in %s stalled on the stopped webhook", ns)
	}

	// The real thing: Volcano's scheduler writes PodGroup status while hyperbatch is down.
	volcanoWritesStatus(t, client.ObjectKey{Namespace: "gov", Name: "pg-vc"}, client.ObjectKey{Namespace: "free", Name: "pg-vc"})

	// Ungoverned namespaces are not hyperbatch's: a new PodGroup there is created.
	require.NoError(t, c.Create(ctx, podGroup("free", "pg-2", "")), "a PodGroup in an ungoverned namespace was blocked by the outage")

	// What hyperbatch guards still fails closed.
	err = c.Create(ctx, podGroup("gov", "pg-2", "team-a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "podgroup.mutate.hyperbatch.dev")
	pg, err := vc.SchedulingV1beta1().PodGroups("gov").Get(ctx, "pg", metav1.GetOptions{})
	require.NoError(t, err)
	pg.Spec.Queue = "other"
	_, err = vc.SchedulingV1beta1().PodGroups("gov").Update(ctx, pg, metav1.UpdateOptions{})
	require.Error(t, err, "a queue change in a governed namespace passed while hyperbatch was down")
	assert.Contains(t, err.Error(), "failed calling webhook")

	// A namespace created during the outage is not judged yet (no label): it may be governed, so
	// its workloads fail closed until hyperbatch is back.
	require.NoError(t, c.Create(ctx, builders.Namespace("late", map[string]string{"team": "a"}, nil)))
	err = c.Create(ctx, podGroup("late", "pg", "team-a"))
	require.Error(t, err, "a PodGroup in a namespace not judged yet passed while hyperbatch was down")
	assert.Contains(t, err.Error(), "failed calling webhook")
}
