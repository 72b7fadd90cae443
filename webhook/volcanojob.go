package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Volcano Jobs (batch.volcano.sh/v1alpha1): spec.queue, priorityClassName, schedulerName,
// networkTopology, ttlSecondsAfterFinished and the active-deadline annotation are defaulted on
// CREATE and carried over on UPDATE.
func (d *deps) volcanoJobMutator() *mutator[*batchv1alpha1.Job] {
	return &mutator[*batchv1alpha1.Job]{
		handlerBase: base[batchv1alpha1.Job](d, KindVolcanoJob),
		apply:       engineOf[*batchv1alpha1.Job](KindVolcanoJob),
		copyObj:     ownTopLevel[batchv1alpha1.Job],
		refused:     d.volcanoJobValidator().refuses,
	}
}

// A Job that Volcano's own webhook refuses to create (volcanoRefusal) is left to it. Other Volcano
// Jobs are checked for: spec.queue in the policy's allowedQueues; spec.ttlSecondsAfterFinished
// >= 0 and immutable once set; the lifecycle annotations; on CREATE, each task's partitionPolicy
// (defaults.PartitionMismatch: the sub-groups it becomes).
func (d *deps) volcanoJobValidator() *validator[*batchv1alpha1.Job] {
	return &validator[*batchv1alpha1.Job]{
		handlerBase:  base[batchv1alpha1.Job](d, KindVolcanoJob),
		refusedFirst: d.volcanoRefusal,
		check: func(_ context.Context, c *checker, job, old *batchv1alpha1.Job, update bool) error {
			spec := field.NewPath("spec")
			c.queue(spec.Child("queue"), job.Spec.Queue, update, old.Spec.Queue, true)
			c.ttlField(spec.Child("ttlSecondsAfterFinished"), job.Spec.TTLSecondsAfterFinished, old.Spec.TTLSecondsAfterFinished, update)
			c.lifecycleAnnotations(job, old, update)
			for i, task := range job.Spec.Tasks {
				if msg := defaults.PartitionMismatch(task); msg != "" && !update {
					c.errs = append(c.errs, field.Invalid(spec.Child("tasks").Index(i).Child("partitionPolicy"), task.PartitionPolicy, msg))
				}
			}
			return nil
		},
	}
}
