package defaults

import (
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// PodGroup fills a Volcano PodGroup's spec.queue, priorityClassName and networkTopology where unset.
func PodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies) Result {
	return fillPodGroup(pg, ns, pols, "")
}

// JobSetPodGroup is PodGroup for the PodGroup of JobSet js: a policy's networkTopology is left out
// (a Skip) when one of the JobSet's pod templates pins its pods to nodes, as for a Pod or a Volcano Job.
func JobSetPodGroup(pg *schedulingv1beta1.PodGroup, js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) Result {
	return fillPodGroup(pg, ns, pols, jobSetPinnedNodes(js))
}

// fillPodGroup is PodGroup; pinned describes how the gang's pods are pinned to nodes ("" when not).
func fillPodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies, pinned string) Result {
	if pg == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()
	r.fillSpecQueue(&pg.Spec.Queue, "spec.queue")
	r.fillString(&pg.Spec.PriorityClassName, d.PriorityClassName, "spec.priorityClassName", FieldPriorityClassName)
	if pg.Spec.NetworkTopology == nil && d.NetworkTopology != nil {
		if pinned != "" {
			r.skip("spec.networkTopology", FieldNetworkTopology, topologyDescription(d.NetworkTopology), pinned)
		} else {
			pg.Spec.NetworkTopology = podGroupTopology(d.NetworkTopology)
			r.record("spec.networkTopology", FieldNetworkTopology, r.policySource())
		}
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
