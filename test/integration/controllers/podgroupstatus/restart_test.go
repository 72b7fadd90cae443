package podgroupstatus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// A new controller (restart, or a new leader) reconciles every PodGroup from a fresh cache and writes
// nothing when nothing changed: no lost or double-counted reservation, no status churn. The
// PodGroups of the tests that ran before it (file order) are there too, in every phase.
func TestRestartWritesNothing(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "restart")
	owner := volcanoJob(t, ns, "owner", hb)
	q := queue(t, "restart-q", gpus(8), schedulingv1beta1.QueueStateOpen, "")
	podGroup(t, ns, "in", pgOpts{queue: q, minMember: 1, minGPU: 8, owner: owner})
	waitPG(t, ns, "in", "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))
	podGroup(t, ns, "held", pgOpts{queue: q, minMember: 1, minGPU: 8, owner: owner})
	waitPG(t, ns, "held", "Pending", unschedulable(corev1.ConditionTrue, "QueueCapabilityExceeded"))

	var all schedulingv1beta1.PodGroupList
	require.NoError(t, env.Client.List(ctxFor(t, 10*time.Second), &all))
	reconciles := counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus")
	requeues := counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus", "result", "requeue_after")

	ctl.stop()
	next, err := startController()
	require.NoError(t, err)
	ctl = next

	// Positive signal: the new controller has reconciled at least every PodGroup once and is idle.
	waitFor(t, 60*time.Second, "the new controller to reconcile every PodGroup and go idle", func(context.Context) (bool, error) {
		done := counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus") - reconciles
		depth := counterValue(t, "workqueue_depth", "name", "podgroupstatus")
		active := counterValue(t, "controller_runtime_active_workers", "controller", "podgroupstatus")
		return done >= float64(len(all.Items)) && depth == 0 && active == 0, nil
	})
	assert.Zero(t, ctl.writes.Total(), "PodGroup writes after the restart")
	assert.Zero(t, counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus", "result", "requeue_after")-requeues,
		"delayed (rate-limited) writes pending after the restart")

	// The reservation survived: the held gang is still held, and is enqueued when the first goes.
	pg, err := getPG(ctxFor(t, 10*time.Second), ns, "held")
	require.NoError(t, err)
	assert.Equal(t, schedulingv1beta1.PodGroupPending, pg.Status.Phase)
	require.NoError(t, env.Client.Delete(ctxFor(t, 10*time.Second), &schedulingv1beta1.PodGroup{ObjectMeta: metav1ObjectMeta(ns, "in")}))
	waitPG(t, ns, "held", "Inqueue after the holder is deleted", phaseIs(schedulingv1beta1.PodGroupInqueue))
}
