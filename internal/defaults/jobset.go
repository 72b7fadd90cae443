package defaults

import (
	"strconv"
	"strings"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// JobSet fills a JobSet's queue annotation, copies its queue into every replicatedJob's pod template
// that has none, fills the pod templates' priorityClassName and schedulerName, and fills
// spec.ttlSecondsAfterFinished and the hyperbatch.dev/active-deadline-seconds annotation (not for a
// JobSet a TrainJob controls: TrainJobOwned). When the
// JobSet is a gang (JobSetIsGang), every pod template without one gets the annotation
// scheduling.k8s.io/group-name: <JobSet name>, the PodGroup controllers/podgroup makes.
//
// The pod templates get the JobSet's effective queue so pods agree with the PodGroup made for the
// JobSet: the JobSet's own annotation when the user set it (source "jobset:<name>" in
// defaulted-by), else the namespace annotation or policy queue written on the JobSet.
func JobSet(js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) Result {
	if js == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()

	queue, source := NormalizeQueue(js.Annotations[QueueNameAnnotation]), Source{Kind: SourceJobSet, Name: js.Name}
	if queue == "" {
		queue, source = r.queueDefault()
		r.fillAnnotation(&js.ObjectMeta, QueueNameAnnotation, queue, FieldQueue, source)
	}

	for i := range js.Spec.ReplicatedJobs {
		tmpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
		prefix := "spec.replicatedJobs[" + strconv.Itoa(i) + "].template.spec.template"
		if NormalizeQueue(tmpl.Annotations[QueueNameAnnotation]) == "" && queue != "" && tmpl.Annotations[QueueNameAnnotation] != queue {
			setAnnotation(&tmpl.ObjectMeta, QueueNameAnnotation, queue)
			r.record(prefix+".metadata.annotations["+QueueNameAnnotation+"]", FieldQueue, source)
		}
		// A template that fixes spec.priority has chosen its priority; a class would contradict it.
		if tmpl.Spec.Priority == nil {
			r.fillString(&tmpl.Spec.PriorityClassName, d.PriorityClassName, prefix+".spec.priorityClassName", FieldPriorityClassName)
		}
		r.fillString(&tmpl.Spec.SchedulerName, d.SchedulerName, prefix+".spec.schedulerName", FieldSchedulerName)
	}

	// A gang's pods name its PodGroup (controllers/podgroup names it after the JobSet) so both
	// schedulers see one gang. A generated name is not known yet at admission: no group then.
	// Templates that name the JobSet's PodGroup also get JobSetGangLabel: the PodGroup gate
	// selects their pods by it.
	if js.Name != "" && JobSetIsGang(js, ns, pols) {
		for i := range js.Spec.ReplicatedJobs {
			tmpl := &js.Spec.ReplicatedJobs[i].Template.Spec.Template
			prefix := "spec.replicatedJobs[" + strconv.Itoa(i) + "].template.spec.template.metadata"
			if strings.TrimSpace(tmpl.Annotations[GroupNameAnnotation]) == "" {
				setAnnotation(&tmpl.ObjectMeta, GroupNameAnnotation, js.Name)
				r.record(prefix+".annotations["+GroupNameAnnotation+"]", FieldGroupName, Source{Kind: SourceJobSet, Name: js.Name})
			}
			if tmpl.Annotations[GroupNameAnnotation] == js.Name && tmpl.Labels[hbv1.JobSetGangLabel] != js.Name {
				if tmpl.Labels == nil {
					tmpl.Labels = map[string]string{}
				}
				tmpl.Labels[hbv1.JobSetGangLabel] = js.Name
				r.record(prefix+".labels["+hbv1.JobSetGangLabel+"]", FieldGroupName, Source{Kind: SourceJobSet, Name: js.Name})
			}
		}
	}

	// A TrainJob's JobSet is governed by the TrainJob's lifecycle (its native deadline, hyperbatch's
	// TTL annotation on it): a TTL or deadline of its own would delete or fail it under a live
	// TrainJob.
	if TrainJobOwned(js) {
		return r.finish(&js.ObjectMeta)
	}
	if js.Spec.TTLSecondsAfterFinished == nil && d.TTLSecondsAfterFinished != nil {
		v := *d.TTLSecondsAfterFinished
		js.Spec.TTLSecondsAfterFinished = &v
		r.record("spec.ttlSecondsAfterFinished", FieldTTLSecondsAfterFinished, r.policySource())
	}
	r.fillAnnotation(&js.ObjectMeta, hbv1.ActiveDeadlineSecondsAnnotation, formatInt64(d.ActiveDeadlineSeconds),
		FieldActiveDeadlineSeconds, r.policySource())
	return r.finish(&js.ObjectMeta)
}
