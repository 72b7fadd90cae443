package podgroupstatus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// Kubelet-like status updates of a member pod (container restart counts, the Ready condition's probe
// time) cost no PodGroup reconcile; the phase change after them does, and is written.
func TestPodHeartbeatsDoNotReconcile(t *testing.T) {
	dumpLogOnFailure(t)
	const heartbeats = 20
	ns := namespace(t, "heartbeat")
	fakeNode(t, "heartbeat", "heartbeat-n0", "heartbeat-rack")
	podGroup(t, ns, "g", pgOpts{minMember: 1})
	// Bound at creation (nodeName): the scheduler leaves it alone, the gang is Running at once.
	p := builders.MakeGangPod(ns, "g-0", "g", hb).Obj()
	p.Spec.NodeName = "heartbeat-n0"
	_, err := cs.CoreV1().Pods(ns).Create(ctxFor(t, 30*time.Second), p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPG(t, ns, "g", "Running", phaseIs(schedulingv1beta1.PodGroupRunning))
	waitIdle(t)
	before := counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus")

	for i := 1; i <= heartbeats; i++ {
		rv := updatePodStatus(t, ns, "g-0", func(s *corev1.PodStatus) {
			s.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Image: "registry.example/trainer:v1", RestartCount: int32(i)}}
			s.Conditions = setPodCondition(s.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				LastProbeTime: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))})
		})
		waitCachedPod(t, ns, "g-0", rv)
	}
	// Positive signal: an update the status reads (phase) after the heartbeats is seen and written.
	updatePodStatus(t, ns, "g-0", func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning })
	waitPG(t, ns, "g", "1 running", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Status.Running == 1 })
	waitIdle(t)

	got := counterValue(t, "controller_runtime_reconcile_total", "controller", "podgroupstatus") - before
	t.Logf("%d reconciles for %d heartbeats and one phase change", int(got), heartbeats)
	// The phase change costs a reconcile, its write one more (the PodGroup event), a delayed detail
	// write one more; each heartbeat would cost one without the pod predicate.
	assert.Less(t, got, float64(heartbeats/2), "PodGroup reconciles during %d pod heartbeats and one phase change", heartbeats)
}

// updatePodStatus changes the pod's status as a kubelet would and returns the new resourceVersion.
func updatePodStatus(t *testing.T, ns, name string, change func(*corev1.PodStatus)) string {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	cur, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	change(&cur.Status)
	upd, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	return upd.ResourceVersion
}

func setPodCondition(conds []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

// waitCachedPod waits until the controller's cache holds the pod at resourceVersion rv (its
// update event has been delivered to the controller's handlers' queue).
func waitCachedPod(t *testing.T, ns, name, rv string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		err := ctl.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
		return err == nil && p.ResourceVersion == rv, nil
	})
	require.NoError(t, err, "pod %s/%s at resourceVersion %s in the controller's cache", ns, name, rv)
}

// waitIdle waits until the controller's work queue is empty and no reconcile runs.
func waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, 30*time.Second, "the controller to go idle", func(context.Context) (bool, error) {
		return counterValue(t, "workqueue_depth", "name", "podgroupstatus") == 0 &&
			counterValue(t, "controller_runtime_active_workers", "controller", "podgroupstatus") == 0, nil
	})
}
