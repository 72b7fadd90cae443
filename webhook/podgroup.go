package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Volcano PodGroups (scheduling.volcano.sh/v1beta1): spec.queue (the CRD's "default" counts as
// unset), priorityClassName and networkTopology are defaulted on CREATE and carried over on UPDATE.
// A PodGroup that Volcano's job controller made for a Volcano Job follows its Job instead
// (defaults.VolcanoJobPodGroup): the Job's queue, priorityClassName and networkTopology, including
// the highestTierName that controller drops; it is never defaulted on its own.
func (d *deps) podGroupMutator() *mutator[*schedulingv1beta1.PodGroup] {
	standalone := engineOf[*schedulingv1beta1.PodGroup](KindPodGroup)
	return &mutator[*schedulingv1beta1.PodGroup]{
		handlerBase: base[schedulingv1beta1.PodGroup](d, KindPodGroup),
		apply: func(ctx context.Context, pg *schedulingv1beta1.PodGroup, ns defaults.Namespace, pols *defaults.Policies) (defaults.Result, error) {
			if defaults.TrainJobOwned(pg) {
				// Kubeflow Trainer's PodGroup of a TrainJob: the policy's defaults, and the price
				// the podgroup controller wrote kept against Trainer's re-applied sum.
				return defaults.TrainerPodGroup(pg, ns, pols), nil
			}
			owner := defaults.VolcanoJobOwner(pg)
			if owner == nil {
				return standalone(ctx, pg, ns, pols)
			}
			job, err := d.volcanoJob(ctx, ns.Name, owner)
			if err != nil || job == nil {
				// Gone: the garbage collector deletes the PodGroup; it is still not defaulted alone.
				return defaults.Result{}, err
			}
			return defaults.VolcanoJobPodGroup(pg, job), nil
		},
		copyObj: ownTopLevel[schedulingv1beta1.PodGroup],
		refused: d.podGroupValidator().refuses,
	}
}

// +kubebuilder:rbac:groups=batch.volcano.sh,resources=jobs,verbs=get;list;watch

// volcanoJob reads the Volcano Job a PodGroup's controller reference names, from the cache and, when
// the cache does not have it (Volcano's job controller creates the PodGroup right after it sees the
// Job, which hyperbatch's informer may not have yet) or has an older Job of the same name, from the
// apiserver. nil without error when no Job with the reference's UID exists.
func (d *deps) volcanoJob(ctx context.Context, namespace string, ref *metav1.OwnerReference) (*batchv1alpha1.Job, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	for _, r := range []reader{d.reader, d.live} {
		if r == nil {
			continue
		}
		var job batchv1alpha1.Job
		err := r.Get(ctx, key, &job)
		switch {
		case err == nil && job.UID == ref.UID:
			return &job, nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading Volcano Job %s, the owner of the PodGroup: %w", key, err)
		}
	}
	return nil, nil
}

// PodGroups are checked for spec.queue in the policy's allowedQueues. Every gang scheduled by
// Volcano has one, whoever made it (a user, Volcano's job controller for a Volcano Job or a bare
// Pod, hyperbatch's PodGroup controller for a JobSet), so this is where the queue rule holds for all.
func (d *deps) podGroupValidator() *validator[*schedulingv1beta1.PodGroup] {
	return &validator[*schedulingv1beta1.PodGroup]{
		handlerBase: base[schedulingv1beta1.PodGroup](d, KindPodGroup),
		check: func(_ context.Context, c *checker, pg, old *schedulingv1beta1.PodGroup, update bool) error {
			c.queue(field.NewPath("spec", "queue"), pg.Spec.Queue, update, old.Spec.Queue, true)
			return nil
		},
	}
}
