package defaults

import (
	"strconv"

	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// VolcanoJob fills a Volcano Job's spec.queue, priorityClassName, schedulerName, networkTopology and
// ttlSecondsAfterFinished, and the hyperbatch.dev/active-deadline-seconds annotation, where unset.
func VolcanoJob(job *batchv1alpha1.Job, ns Namespace, pols *Policies) Result {
	return volcanoJob(job, ns, pols, false, true)
}

// HyperJobChild is VolcanoJob for a child Volcano Job of a HyperJob: everything but
// ttlSecondsAfterFinished, because the HyperJob's lifecycle governs its children (the HyperJob gets
// the policy's TTL instead, see HyperJob).
func HyperJobChild(job *batchv1alpha1.Job, ns Namespace, pols *Policies) Result {
	return volcanoJob(job, ns, pols, false, false)
}

// VolcanoJobExplicitQueue is VolcanoJob for a Job whose spec.queue the user is known to have written
// (the webhook reads this from the request: kubectl's last-applied-configuration or a server-side
// apply's managedFields). Its queue is kept even when it is Volcano's "default", which otherwise
// counts as unset because the Job CRD defaults an omitted queue to "default".
func VolcanoJobExplicitQueue(job *batchv1alpha1.Job, ns Namespace, pols *Policies) Result {
	return volcanoJob(job, ns, pols, true, true)
}

func volcanoJob(job *batchv1alpha1.Job, ns Namespace, pols *Policies, explicitQueue, ttl bool) Result {
	if job == nil {
		return Result{}
	}
	r := begin(ns, pols)
	r.explicitQueue = explicitQueue
	d := r.defaults()
	r.fillJobSpec(&job.Spec, "spec")
	if ttl && job.Spec.TTLSecondsAfterFinished == nil && d.TTLSecondsAfterFinished != nil {
		v := *d.TTLSecondsAfterFinished
		job.Spec.TTLSecondsAfterFinished = &v
		r.record("spec.ttlSecondsAfterFinished", FieldTTLSecondsAfterFinished, r.policySource())
	}
	r.fillAnnotation(&job.ObjectMeta, hbv1.ActiveDeadlineSecondsAnnotation, formatInt64(d.ActiveDeadlineSeconds),
		FieldActiveDeadlineSeconds, r.policySource())
	return r.finish(&job.ObjectMeta)
}

// fillJobSpec fills the gang fields of a Volcano JobSpec (a Volcano Job's spec or a HyperJob
// replicatedJob's templateSpec); prefix is the path of spec.
func (r *run) fillJobSpec(spec *batchv1alpha1.JobSpec, prefix string) {
	d := r.defaults()
	r.fillSpecQueue(&spec.Queue, prefix+".queue")
	r.fillString(&spec.PriorityClassName, d.PriorityClassName, prefix+".priorityClassName", FieldPriorityClassName)
	if spec.SchedulerName == "" && d.SchedulerName != "" {
		if named := jobTaskScheduler(spec, prefix, d.SchedulerName); named != "" {
			r.skip(prefix+".schedulerName", FieldSchedulerName, "schedulerName "+d.SchedulerName, named)
		} else {
			r.fillString(&spec.SchedulerName, d.SchedulerName, prefix+".schedulerName", FieldSchedulerName)
		}
	}
	if spec.NetworkTopology == nil && d.NetworkTopology != nil {
		if pin := jobPinnedNodes(spec, prefix); pin != "" {
			r.skip(prefix+".networkTopology", FieldNetworkTopology, topologyDescription(d.NetworkTopology), pin)
			return
		}
		spec.NetworkTopology = jobTopology(d.NetworkTopology)
		r.record(prefix+".networkTopology", FieldNetworkTopology, r.policySource())
	}
}

// jobTopology converts a policy's network topology to Volcano's batch form.
func jobTopology(nt *hbv1.NetworkTopology) *batchv1alpha1.NetworkTopologySpec {
	out := &batchv1alpha1.NetworkTopologySpec{
		Mode:            batchv1alpha1.NetworkTopologyMode(topologyMode(nt)),
		HighestTierName: nt.HighestTierName,
	}
	if nt.HighestTierAllowed != nil {
		tier := int(*nt.HighestTierAllowed)
		out.HighestTierAllowed = &tier
	}
	return out
}

func formatInt64(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

func formatInt32(v *int32) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(int64(*v), 10)
}
