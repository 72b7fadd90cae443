package defaults

import (
	"strconv"

	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// HyperJob fills queue, priorityClassName, schedulerName and networkTopology into every
// replicatedJob's templateSpec (the Volcano Job each replica becomes), and the HyperJob's
// hyperbatch.dev/ttl-seconds-after-finished and hyperbatch.dev/active-deadline-seconds annotations.
func HyperJob(hj *trainingv1alpha1.HyperJob, ns Namespace, pols *Policies) Result {
	if hj == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()
	for i := range hj.Spec.ReplicatedJobs {
		r.fillJobSpec(&hj.Spec.ReplicatedJobs[i].TemplateSpec, "spec.replicatedJobs["+strconv.Itoa(i)+"].templateSpec")
	}
	r.fillAnnotation(&hj.ObjectMeta, hbv1.TTLSecondsAfterFinishedAnnotation, formatInt32(d.TTLSecondsAfterFinished),
		FieldTTLSecondsAfterFinished, r.policySource())
	r.fillAnnotation(&hj.ObjectMeta, hbv1.ActiveDeadlineSecondsAnnotation, formatInt64(d.ActiveDeadlineSeconds),
		FieldActiveDeadlineSeconds, r.policySource())
	return r.finish(&hj.ObjectMeta)
}
