package hypertopology

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Filter keeps the pod inside its gang's domain (PreFilterResult already does for the normal path;
// the nominated-node and preemption paths only run filters).
func (p *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st := readState(cs)
	if st == nil || st.plan == nil || st.plan.nodes == nil {
		return nil
	}
	if node := ni.Node(); node != nil && !st.plan.nodes.Has(node.Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside %s chosen for gang %s", st.plan.describe, st.key))
	}
	return nil
}
