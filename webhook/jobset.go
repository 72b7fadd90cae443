package webhook

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// JobSets (jobset.x-k8s.io/v1alpha2): the queue annotation, the pod templates' queue annotation,
// priorityClassName and schedulerName, spec.ttlSecondsAfterFinished and the active-deadline
// annotation are defaulted on CREATE and carried over on UPDATE. JobSet's own webhook forbids changes
// to replicatedJobs after creation; carrying the old values over (rather than today's policy values)
// is what keeps a re-applied manifest valid after a policy changed.
func (d *deps) jobSetMutator() *mutator[*jobsetv1alpha2.JobSet] {
	return &mutator[*jobsetv1alpha2.JobSet]{
		handlerBase: base[jobsetv1alpha2.JobSet](d, KindJobSet),
		apply:       engineOf[*jobsetv1alpha2.JobSet](KindJobSet),
		refused:     d.jobSetValidator().refuses,
	}
}

// JobSets are checked for: the JobSet's queue (its scheduling.volcano.sh/queue-name annotation,
// Volcano's "default" when absent) and every pod template's queue annotation in the policy's
// allowedQueues; spec.ttlSecondsAfterFinished >= 0 and immutable once set; the lifecycle annotations.
func (d *deps) jobSetValidator() *validator[*jobsetv1alpha2.JobSet] {
	return &validator[*jobsetv1alpha2.JobSet]{
		handlerBase: base[jobsetv1alpha2.JobSet](d, KindJobSet),
		check: func(_ context.Context, c *checker, js, old *jobsetv1alpha2.JobSet, update bool) error {
			qKey := defaults.QueueNameAnnotation
			c.queue(field.NewPath("metadata", "annotations").Key(qKey), js.Annotations[qKey], update, old.Annotations[qKey], true)
			rjs := field.NewPath("spec", "replicatedJobs")
			for i := range js.Spec.ReplicatedJobs {
				rj := &js.Spec.ReplicatedJobs[i]
				q, ok := rj.Template.Spec.Template.Annotations[qKey]
				if !ok || strings.TrimSpace(q) == "" {
					continue
				}
				var oldTQ string
				var hadT bool
				for j := range old.Spec.ReplicatedJobs {
					if o := &old.Spec.ReplicatedJobs[j]; o.Name == rj.Name {
						oldTQ, hadT = o.Template.Spec.Template.Annotations[qKey]
					}
				}
				p := rjs.Index(i).Child("template", "spec", "template", "metadata", "annotations").Key(qKey)
				c.queue(p, q, update, oldTQ, hadT)
			}
			c.ttlField(field.NewPath("spec", "ttlSecondsAfterFinished"), js.Spec.TTLSecondsAfterFinished, old.Spec.TTLSecondsAfterFinished, update)
			c.lifecycleAnnotations(js, old, update)
			return nil
		},
	}
}
