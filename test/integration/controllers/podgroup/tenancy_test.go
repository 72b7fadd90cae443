package podgroup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// In a namespace no webhook guards, a JobSet asking for a queue its WorkloadPolicy does not allow
// gets no PodGroup, and an Event says why; an allowed queue gets its PodGroup.
func TestPodGroupQueueNotAllowed(t *testing.T) {
	ns := "pg-it-tenancy"
	require.NoError(t, env.Client.Create(ctx(t), builders.Namespace(ns, map[string]string{"tenancy-test": "pg"}, nil)))
	pol := builders.MakePolicy("pg-tenancy").Selector("tenancy-test", "pg").AllowedQueues("team-a").Obj()
	require.NoError(t, env.Client.Create(ctx(t), pol))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	// The policy reaches the controller through its own watch; the JobSets are created once the
	// controller's cache holds it (policies apply from then on, docs/webhooks.md "New policies").
	require.Eventually(t, func() bool {
		return ctlCache.Get(ctx(t), client.ObjectKeyFromObject(pol), &hbv1.WorkloadPolicy{}) == nil
	}, 30*time.Second, 20*time.Millisecond, "WorkloadPolicy %s in the controller's cache", pol.Name)

	bad := newJobSet(ns, "bad", 1, 2, corev1.PodSpec{})
	bad.Annotations = map[string]string{defaults.QueueNameAnnotation: "gpu"}
	require.NoError(t, env.Client.Create(ctx(t), bad))
	ev := waitEvent(t, ns, "bad", podgroup.ReasonQueueNotAllowed)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, `no PodGroup: queue "gpu" is not allowed in namespace "`+ns+`": WorkloadPolicy "pg-tenancy" allows only "team-a"`)
	_, err := getPG(t, ns, "bad")
	assert.True(t, apierrors.IsNotFound(err), "no PodGroup in a disallowed queue: %v", err)

	good := newJobSet(ns, "good", 1, 2, corev1.PodSpec{})
	good.Annotations = map[string]string{defaults.QueueNameAnnotation: "team-a"}
	require.NoError(t, env.Client.Create(ctx(t), good))
	pg := waitPG(t, ns, "good", func(*schedulingv1beta1.PodGroup) bool { return true })
	assert.Equal(t, "team-a", pg.Spec.Queue)
}
