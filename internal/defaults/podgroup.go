package defaults

import (
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// PodGroup fills a Volcano PodGroup's spec.queue, priorityClassName and networkTopology where unset.
func PodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies) Result {
	if pg == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()
	r.fillSpecQueue(&pg.Spec.Queue, "spec.queue")
	r.fillString(&pg.Spec.PriorityClassName, d.PriorityClassName, "spec.priorityClassName", FieldPriorityClassName)
	if pg.Spec.NetworkTopology == nil && d.NetworkTopology != nil {
		pg.Spec.NetworkTopology = podGroupTopology(d.NetworkTopology)
		r.record("spec.networkTopology", FieldNetworkTopology, r.policySource())
	}
	return r.finish(&pg.ObjectMeta)
}

// podGroupTopology converts a policy's network topology to Volcano's scheduling form.
func podGroupTopology(nt *hbv1.NetworkTopology) *schedulingv1beta1.NetworkTopologySpec {
	out := &schedulingv1beta1.NetworkTopologySpec{
		Mode:            schedulingv1beta1.NetworkTopologyMode(topologyMode(nt)),
		HighestTierName: nt.HighestTierName,
	}
	if nt.HighestTierAllowed != nil {
		tier := int(*nt.HighestTierAllowed)
		out.HighestTierAllowed = &tier
	}
	return out
}
