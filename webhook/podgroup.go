package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// Volcano PodGroups (scheduling.volcano.sh/v1beta1): spec.queue (the CRD's "default" counts as
// unset), priorityClassName and networkTopology are defaulted on CREATE and carried over on UPDATE.
func (d *deps) podGroupMutator() *mutator[*schedulingv1beta1.PodGroup] {
	return &mutator[*schedulingv1beta1.PodGroup]{
		handlerBase: base[schedulingv1beta1.PodGroup](d, KindPodGroup),
		apply:       engineOf[*schedulingv1beta1.PodGroup](KindPodGroup),
		copyObj:     ownTopLevel[schedulingv1beta1.PodGroup],
	}
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
