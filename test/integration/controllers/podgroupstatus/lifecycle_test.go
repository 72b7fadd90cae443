package podgroupstatus

import (
	"context"
	"fmt"
	"time"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// A standalone gang of hyperbatch-scheduler goes Inqueue, the scheduler binds it inside one rack, it
// is Running with the Scheduled condition, its counts follow the pods, and it ends Completed.
func TestPhasesWithScheduler(t *testing.T) {
	dumpLogOnFailure(t)
	ns := namespace(t, "phases")
	rack(t, "phases", "phases-rack-0", 2)
	rack(t, "phases", "phases-rack-1", 2)
	q := queue(t, "phases-q", nil, "", "") // status.state empty: no queue controller has run, counts as Open

	phases := recordPhases(t, ns, "g")
	podGroup(t, ns, "g", pgOpts{queue: q, minMember: 3, minGPU: 12, topology: hardTier1()})
	// A standalone PodGroup is served once a pod of hyperbatch-scheduler names it. The scheduler holds
	// an incomplete gang (PreEnqueue, fewer than minMember pods), so with one pod the PodGroup is
	// enqueued before the gang can be placed; the rest of the gang follows.
	gangPods(t, "phases", ns, "g", hb, 1, 4)
	waitPG(t, ns, "g", "Inqueue", phaseIs(schedulingv1beta1.PodGroupInqueue))
	waitEvent(t, ns, "g", "Enqueued", fmt.Sprintf("admitted to queue %q", q))
	gangPodsFrom(t, "phases", ns, "g", hb, 1, 2, 4)

	nodes := waitBound(t, ns, "g", 3)
	racks := map[string]bool{}
	for _, n := range nodes {
		racks[n[:len("phases-rack-0")]] = true
	}
	assert.Len(t, racks, 1, "gang placed inside one rack: %v", nodes)

	pg := waitPG(t, ns, "g", "Running", phaseIs(schedulingv1beta1.PodGroupRunning))
	sc := condition(pg, schedulingv1beta1.PodGroupScheduled)
	require.NotNil(t, sc, "Scheduled condition")
	assert.Equal(t, corev1.ConditionTrue, sc.Status)
	assert.Equal(t, int32(0), pg.Status.Running, "bound pods are not running before the kubelet says so")

	setPodsPhase(t, ns, "g", corev1.PodRunning)
	waitPG(t, ns, "g", "3 running", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Status.Running == 3 })

	setPodsPhase(t, ns, "g", corev1.PodSucceeded)
	pg = waitPG(t, ns, "g", "Completed", phaseIs(schedulingv1beta1.PodGroupCompleted))
	assert.Equal(t, int32(3), pg.Status.Succeeded)
	assert.Equal(t, int32(0), pg.Status.Running)
	assert.Equal(t, int32(0), pg.Status.Failed)

	// Every write is visible to a watch: the stored phases went "" → Inqueue → Running → Completed.
	waitFor(t, 10*time.Second, "the watch to see Completed", func(context.Context) (bool, error) {
		p := phases.get()
		return len(p) > 0 && p[len(p)-1] == schedulingv1beta1.PodGroupCompleted, nil
	})
	assert.Equal(t, []schedulingv1beta1.PodGroupPhase{"", schedulingv1beta1.PodGroupInqueue, schedulingv1beta1.PodGroupRunning, schedulingv1beta1.PodGroupCompleted}, phases.get())
}
