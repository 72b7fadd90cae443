package hypertopology

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// Filter keeps the pod inside its gang's domain (PreFilterResult already does for the normal path;
// the nominated-node and preemption paths only run filters).
func (p *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if node := ni.Node(); node != nil {
		var key gang.Key
		if st := readState(cs); st != nil {
			key = st.key
		}
		if holder := p.res.holderOf(node.Name, key, corev1helpers.PodPriority(pod), time.Now()); holder != "" {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is held for gang %s, which preempted to clear it", holder))
		}
	}
	st := readState(cs)
	if st == nil || st.plan == nil || st.plan.nodes == nil {
		return nil
	}
	if node := ni.Node(); node != nil && st.pins != nil && !st.pins.Has(node.Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside the room %s chosen for the pod's sub-group of gang %s", st.plan.describe, st.key))
	}
	if node := ni.Node(); node != nil && !st.plan.nodes.Has(node.Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside %s chosen for gang %s", st.plan.describe, st.key))
	}
	return nil
}
