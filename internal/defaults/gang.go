package defaults

import (
	"strconv"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Scheduler names whose pods are gang members.
const (
	HyperbatchSchedulerName = "hyperbatch-scheduler"
	VolcanoSchedulerName    = "volcano"
)

// JobSetIsGang says whether a JobSet is a gang (gets a PodGroup from controllers/podgroup, and pod
// templates that name it): not when it carries hyperbatch.dev/gang: "false", nor when JobSet starts
// its pods in stages (JobSetStagedStart: a gang of all its pods could never start); yes when a pod
// template names hyperbatch-scheduler or volcano, when it carries Volcano's queue annotation, or
// when the governing WorkloadPolicy says defaults.gang: true.
func JobSetIsGang(js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) bool {
	return jobSetWantsGang(js, ns, pols) && JobSetStagedStart(js) == ""
}

// JobSetGangBlocked names the JobSet feature that keeps a JobSet which would otherwise be a gang from
// being one ("" when it is a gang, or would not be one anyway).
func JobSetGangBlocked(js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) string {
	if !jobSetWantsGang(js, ns, pols) {
		return ""
	}
	return JobSetStagedStart(js)
}

// JobSetStagedStart names the JobSet feature (sigs.k8s.io/jobset v0.10) under which JobSet creates a
// JobSet's pods in stages, so that they never all exist, pending, at once ("" when none):
//   - a replicatedJob's dependsOn: its Jobs are created only once the named replicatedJobs are Ready
//     or Complete;
//   - startupPolicy InOrder with more than one replicatedJob: each replicatedJob's Jobs are created
//     once the previous one's are ready;
//   - exclusive placement (annotation alpha.jobset.sigs.k8s.io/exclusive-topology on the JobSet or on
//     a replicatedJob's Job template) without the node-selector strategy: JobSet's pod webhook refuses
//     each follower pod until its Job's leader pod is scheduled.
//
// A gang's scheduler places no pod before minMember pods exist, so a gang of all the pods would wait
// forever for pods that wait for it.
func JobSetStagedStart(js *jobsetv1alpha2.JobSet) string {
	for i := range js.Spec.ReplicatedJobs {
		if rj := &js.Spec.ReplicatedJobs[i]; len(rj.DependsOn) > 0 {
			return "spec.replicatedJobs[" + strconv.Itoa(i) + "].dependsOn (" + rj.Name + ")"
		}
	}
	if sp := js.Spec.StartupPolicy; sp != nil && sp.StartupPolicyOrder == jobsetv1alpha2.InOrder && len(js.Spec.ReplicatedJobs) > 1 {
		return "spec.startupPolicy.startupPolicyOrder: InOrder"
	}
	if _, ok := js.Annotations[jobsetv1alpha2.NodeSelectorStrategyKey]; ok {
		return ""
	}
	if _, ok := js.Annotations[jobsetv1alpha2.ExclusiveKey]; ok {
		return "exclusive placement (annotation " + jobsetv1alpha2.ExclusiveKey + ")"
	}
	for i := range js.Spec.ReplicatedJobs {
		if _, ok := js.Spec.ReplicatedJobs[i].Template.Annotations[jobsetv1alpha2.ExclusiveKey]; ok {
			return "exclusive placement (annotation " + jobsetv1alpha2.ExclusiveKey + " on spec.replicatedJobs[" + strconv.Itoa(i) + "].template)"
		}
	}
	return ""
}

func jobSetWantsGang(js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) bool {
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
