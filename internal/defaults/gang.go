package defaults

import (
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Scheduler names whose pods are gang members.
const (
	HyperbatchSchedulerName = "hyperbatch-scheduler"
	VolcanoSchedulerName    = "volcano"
)

// JobSetIsGang says whether a JobSet is a gang (gets a PodGroup from controllers/podgroup, and pod
// templates that name it): not when it carries hyperbatch.dev/gang: "false"; yes when a pod template
// names hyperbatch-scheduler or volcano, when it carries Volcano's queue annotation, or when the
// governing WorkloadPolicy says defaults.gang: true.
func JobSetIsGang(js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) bool {
	if js.Annotations[hbv1.GangAnnotation] == hbv1.GangAnnotationOptOut {
		return false
	}
	for i := range js.Spec.ReplicatedJobs {
		switch js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.SchedulerName {
		case HyperbatchSchedulerName, VolcanoSchedulerName:
			return true
		}
	}
	if NormalizeQueue(js.Annotations[QueueNameAnnotation]) != "" {
		return true
	}
	if pol := pols.MatchNamespace(ns); pol != nil && pol.Spec.Defaults.Gang != nil {
		return *pol.Spec.Defaults.Gang
	}
	return false
}
