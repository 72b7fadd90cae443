package defaults

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Pod fills a Pod's queue annotation, priorityClassName, schedulerName and network-topology
// annotations where they are unset (see the package doc for what "unset" means on a Pod). DaemonSet
// pods and static pods' mirrors are left alone (platformPod), and a Pod pinned to nodes gets no
// topology (a Skip).
func Pod(pod *corev1.Pod, ns Namespace, pols *Policies) Result {
	if pod == nil || platformPod(pod) {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()

	if NormalizeQueue(pod.Annotations[QueueNameAnnotation]) == "" {
		q, src := r.queueDefault()
		r.fillAnnotation(&pod.ObjectMeta, QueueNameAnnotation, q, FieldQueue, src)
	}

	if pod.Spec.PriorityClassName == "" && d.PriorityClassName != "" {
		pod.Spec.PriorityClassName = d.PriorityClassName
		// Computed by the Priority admission plugin for "no class"; let it be recomputed.
		pod.Spec.Priority = nil
		pod.Spec.PreemptionPolicy = nil
		r.record("spec.priorityClassName", FieldPriorityClassName, r.policySource())
	}

	// The apiserver writes "default-scheduler" into an omitted schedulerName while decoding the
	// request, before any admission plugin runs, so on a Pod it cannot be told from "not chosen".
	// It counts as unset when the governing policy names another scheduler (see the package doc).
	if pod.Spec.SchedulerName == corev1.DefaultSchedulerName && d.SchedulerName != "" && d.SchedulerName != corev1.DefaultSchedulerName {
		pod.Spec.SchedulerName = ""
	}
	r.fillString(&pod.Spec.SchedulerName, d.SchedulerName, "spec.schedulerName", FieldSchedulerName)

	_, hasMode := pod.Annotations[NetworkTopologyModeAnnotation]
	_, hasTier := pod.Annotations[NetworkTopologyHighestTierAnnotation]
	nt := d.NetworkTopology
	pin := ""
	if nt != nil && nt.HighestTierName == "" && !hasMode && !hasTier {
		pin = pinnedNodes(&pod.Spec, "spec")
	}
	if pin != "" {
		r.skip("metadata.annotations["+NetworkTopologyModeAnnotation+"]", FieldNetworkTopology, topologyDescription(nt), pin)
	} else if nt != nil && nt.HighestTierName == "" && !hasMode && !hasTier {
		src := r.policySource()
		r.fillAnnotation(&pod.ObjectMeta, NetworkTopologyModeAnnotation, string(topologyMode(nt)), FieldNetworkTopology, src)
		if nt.HighestTierAllowed != nil {
			tier := strconv.FormatInt(int64(*nt.HighestTierAllowed), 10)
			r.fillAnnotation(&pod.ObjectMeta, NetworkTopologyHighestTierAnnotation, tier, FieldNetworkTopology, src)
		}
	}

	return r.finish(&pod.ObjectMeta)
}

// MirrorPodAnnotation marks a static pod's mirror in the apiserver (the kubelet sets it).
const MirrorPodAnnotation = corev1.MirrorPodAnnotationKey

// platformPod reports whether a Pod belongs to the node rather than to a workload: a DaemonSet's
// pod, or a static pod's mirror (the kubernetes.io/config.mirror annotation, or a Node owner). A
// catch-all policy must not move these to another scheduler, priority or queue; they are never
// defaulted.
func platformPod(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[MirrorPodAnnotation]; ok {
		return true
	}
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" && strings.HasPrefix(o.APIVersion, "apps/") {
			return true
		}
		if o.Kind == "Node" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// topologyMode is the policy's mode with the API default ("hard") applied.
func topologyMode(nt *hbv1.NetworkTopology) hbv1.NetworkTopologyMode {
	if nt.Mode == "" {
		return hbv1.NetworkTopologyHard
	}
	return nt.Mode
}

// WorkloadPodSelector picks the Pods admitted as Pods: those made by Volcano's job controller or by
// a JobSet's Jobs come from templates the Volcano Job or JobSet admission already defaulted and
// checked, so they are left out. The Pod webhooks and the Pod admission policies both match with it.
func WorkloadPodSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: batchv1alpha1.JobNameKey, Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: jobsetv1alpha2.JobSetNameKey, Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
}
