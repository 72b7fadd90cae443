package webhook

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Pods are defaulted on CREATE. On UPDATE nothing new is filled: a Pod's spec is immutable, and
// the queue and topology annotations are read when the Pod is scheduled or its PodGroup is made, so
// adding them to an existing Pod would claim a queue it never went through. An UPDATE only gets back
// what it dropped (the generic carry-over). That matters for one real sequence: `kubectl apply`
// (client-side) then `kubectl apply --server-side`. The apiserver writes "default-scheduler" into the
// Pod before the field manager runs, so the client-side applier owns spec.schedulerName; kubectl hands
// that ownership to its server-side manager, whose apply then drops the field, and the apiserver
// defaults it to "default-scheduler" again, which Pod validation would refuse as a change of an
// immutable field. The carry-over restores the value the Pod has.
func (d *deps) podMutator() *mutator[*corev1.Pod] {
	return &mutator[*corev1.Pod]{
		handlerBase: base[corev1.Pod](d, KindPod),
		apply:       engineOf[*corev1.Pod](KindPod),
		copyObj:     ownTopLevel[corev1.Pod],
		finish:      d.podPriority,
		refused:     d.podValidator().refuses,
		judgeCreate: d.podValidator().judge,
	}
}

// podPriority completes a filled spec.priorityClassName. The in-tree Priority admission plugin runs
// before webhooks and computed spec.priority for "no class"; the engine cleared it, and here it is
// set from the PriorityClass (from the cache), as the plugin would. A class that does not exist is
// denied now, naming the policy, rather than later by the plugin with a bare "not found".
func (d *deps) podPriority(ctx context.Context, pod *corev1.Pod, ns defaults.Namespace, res defaults.Result) (string, field.ErrorList, error) {
	if !res.Filled("spec.priorityClassName") {
		return "", nil, nil
	}
	name := pod.Spec.PriorityClassName
	pc, err := d.priorityClass(ctx, name)
	if err != nil {
		return "", nil, err
	}
	if pc == nil {
		return "", field.ErrorList{defaults.MissingPriorityClass(name, res.Policy, ns.Name)}, nil
	}
	value := pc.Value
	pod.Spec.Priority = &value
	if pc.PreemptionPolicy != nil {
		pp := *pc.PreemptionPolicy
		pod.Spec.PreemptionPolicy = &pp
	}
	return defaults.PriorityNote(name, value, pc.PreemptionPolicy), nil, nil
}

// Pods are checked for allowed queues only when they name one themselves and belong to no
// PodGroup: a PodGroup member is scheduled in its PodGroup's queue, which is checked on the
// PodGroup. A Pod without a queue annotation is not using a Volcano queue of its own choosing.
func (d *deps) podValidator() *validator[*corev1.Pod] {
	return &validator[*corev1.Pod]{
		handlerBase: base[corev1.Pod](d, KindPod),
		check: func(_ context.Context, c *checker, pod, old *corev1.Pod, update bool) error {
			q := pod.Annotations[defaults.QueueNameAnnotation]
			oldQ, had := old.Annotations[defaults.QueueNameAnnotation]
			path := field.NewPath("metadata", "annotations").Key(defaults.QueueNameAnnotation)
			if !c.queueSpelling(path, q, update, oldQ, had) || strings.TrimSpace(q) == "" ||
				strings.TrimSpace(pod.Annotations[defaults.GroupNameAnnotation]) != "" {
				return nil
			}
			// The queue counts as judged before only when the old Pod was judged: it named it and
			// belonged to no PodGroup. Otherwise dropping the group-name annotation would let an
			// unjudged queue through.
			judged := had && strings.TrimSpace(old.Annotations[defaults.GroupNameAnnotation]) == ""
			c.queue(path, q, update, oldQ, judged)
			return nil
		},
	}
}
