package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// Deleting a PodGroup while its members wait at Permit gives their nodes back at once, long before
// the Permit timeout (60 s).
func TestPodGroupDeleteReleasesReservations(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "pgdelete"
	ns := namespace(t, "t-pgdelete")
	buildTree(t, test, 1, 1)

	podGroup(t, ns, "g", 3, hardTier(1))
	pods := gangPods(test, ns, "g", 3)
	pods[2].Spec.SchedulerName = "nobody" // never scheduled here: the others wait at Permit
	createPods(t, pods...)
	waitFor(t, 30*time.Second, func() bool { return len(waitingPods(ns, "g")) == 2 }, "2 pods waiting at Permit")

	ctx := ctxFor(t, 30*time.Second)
	require.NoError(t, env.Client.Delete(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"}}))
	start := time.Now()
	waitFor(t, 15*time.Second, func() bool { return len(waitingPods(ns, "g")) == 0 }, "the deleted PodGroup's reservations to be released")
	t.Logf("released %v after the PodGroup was deleted", time.Since(start).Round(time.Millisecond))
	// The rejection's message is transient: the released pods go straight back to the queue and their
	// condition is soon rewritten with the wait for the (now missing) PodGroup. Either shows that the
	// scheduler saw the deletion; the release itself is asserted above.
	waitPodMessageAny(t, ns, "g",
		[]string{"PodGroup " + ns + "/g was deleted; the gang's reservations are released"},
		[]string{"waiting for PodGroup " + ns + "/g"})
	require.Zero(t, bound(placements(t, ns, "g")))
}

// A node leaving the cluster while a gang without a networkTopology (so without a plan) waits at
// Permit on it re-plans the gang onto the remaining nodes before the Permit timeout.
func TestNodeLeavingReplansWaitingGang(t *testing.T) {
	replansWaitingGang(t, "nodeleave", "deleted", func(ctx context.Context, node string) {
		require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
	}, "node %s left the cluster while the gang waited")
}

// A node found not Ready (the node controller's node.kubernetes.io/unreachable:NoSchedule, put on
// by hand here: no node controller runs in this suite; test/e2e/realnodes TestGangWithNotReadyNode
// stops a real kubelet) while a gang waits at Permit on it re-plans the gang onto the remaining
// nodes before the Permit timeout, instead of binding pods to a node that cannot run them.
func TestNotReadyNodeReplansWaitingGang(t *testing.T) {
	replansWaitingGang(t, "notready", "unreachable", func(ctx context.Context, node string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}, "node %s became NotReady (node.kubernetes.io/unreachable:NoSchedule) while the gang waited")
}

// replansWaitingGang holds a 4-pod gang at Permit with 3 pods reserved (its 4th names another
// scheduler), does act to the node of one reservation, and checks that the gang is released with
// the GangReleased Event event (a format with the node's name) and re-planned off that node: the 3
// waiting pods leave it, and once the 4th member comes the gang binds whole elsewhere.
func replansWaitingGang(t *testing.T, test, what string, act func(ctx context.Context, node string), event string) {
	t.Helper()
	dumpLogOnFailure(t)
	ns := namespace(t, "t-"+test)
	buildTree(t, test, 1, 2)

	podGroup(t, ns, "g", 4, nil)
	pods := gangPods(test, ns, "g", 4)
	pods[3].Spec.SchedulerName = "nobody"
	createPods(t, pods...)
	waitFor(t, 30*time.Second, func() bool { return len(waitingPods(ns, "g")) == 3 }, "3 pods waiting at Permit")
	var node string
	for _, n := range waitingPods(ns, "g") {
		node = n
	}
	act(ctxFor(t, 30*time.Second), node)
	waitFor(t, 30*time.Second, func() bool {
		w := waitingPods(ns, "g")
		if len(w) != 3 {
			return false
		}
		for _, n := range w {
			if n == node {
				return false
			}
		}
		return true
	}, fmt.Sprintf("the waiting pods to leave %s node %s", what, node))
	waitEvent(t, ns, "g", "GangReleased", fmt.Sprintf(event, node))

	deletePod(t, ns, pods[3].Name)
	createPods(t, gangPod(test, ns, "g", "g-real"))
	for p, n := range waitBound(t, ns, "g", 4, 60*time.Second) {
		require.NotEqual(t, node, n, "pod %s bound to the %s node", p, what)
	}
}

// A gang found partly bound with nothing in flight (as after a scheduler restart between binding
// its first and last member, or a failed binding) is reported with a GangPartlyBound Event and
// completed next to its bound pods, even where best fit alone would choose another rack.
func TestPartlyBoundGangCompleted(t *testing.T) {
	dumpLogOnFailure(t)
	const test = "partly"
	ns := namespace(t, "t-partly")
	tr := buildTree(t, test, 2, 2) // 2 racks × 2 nodes × 8 GPUs

	// Rack 1 is the tighter fit for a fresh gang: a plain pod uses 4 of its GPUs.
	filler := gangPod(test, ns, "", "filler")
	filler.Labels["group"] = "filler"
	filler.Spec.NodeName = tr.racks[1][0]
	filler.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("4")
	filler.Spec.Containers[0].Resources.Limits[gpu] = resource.MustParse("4")
	createPods(t, filler)

	podGroup(t, ns, "g", 4, hardTier(2))
	// Two members were bound to rack 0 by an earlier scheduler instance.
	pods := gangPods(test, ns, "g", 4)
	pods[0].Spec.NodeName, pods[1].Spec.NodeName = tr.racks[0][0], tr.racks[0][1]
	createPods(t, pods[0], pods[1])
	createPods(t, pods[2], pods[3])

	got := waitBound(t, ns, "g", 4, 60*time.Second)
	for p, n := range got {
		require.Equal(t, 0, tr.rackOf[n], "pod %s bound to %s, outside the bound members' rack", p, n)
	}
	waitEvent(t, ns, "g", "GangPartlyBound", "has 2 of its minMember 4 pods bound", "completing it")
}
