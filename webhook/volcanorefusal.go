package webhook

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=queues,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch

// volcanoRefusal says why Volcano's own job webhook (validatejob.volcano.sh, volcano.sh/volcano
// v1.14) refuses to create job, "" when none of the rules hyperbatch knows refuses it. The
// apiserver calls the validating webhooks of a request in parallel and returns the first refusal
// that arrives, so when both webhooks refuse a Job the user would see either message, by chance.
// hyperbatch's Volcano Job validator admits such a Job unchecked (validator.refusedFirst) and its
// mutator prints no warning for it, so Volcano's message is the one shown. Nothing is let through
// that would run: Volcano refuses the Job, and were its webhook not installed, the PodGroup its job
// controller makes is still judged by hyperbatch's PodGroup validator (allowedQueues).
//
// Only where Volcano's job webhook is registered (VolcanoJobWebhookName in a
// ValidatingWebhookConfiguration): without it nothing else refuses such a Job, and hyperbatch judges
// it as any other.
//
// The rules are the ones of Volcano's create validation that depend on the Job and its Queue only:
// minAvailable, maxRetry and ttlSecondsAfterFinished not negative; at least one task; task replicas
// and minAvailable in range, task names DNS-1123 labels and unique; the Job's minAvailable within
// its tasks' replicas; the Job's and its pods' names qualified names; a cluster Queue that exists
// (hyperbatch's cache, then the apiserver) and is Open. Volcano's other rules (pod template
// validation, policies, plugins, volumes, task dependencies, hierarchical queues) are not repeated
// here: when one of them refuses a Job that hyperbatch refuses too, the message shown still varies.
func (d *deps) volcanoRefusal(ctx context.Context, job *batchv1alpha1.Job) (string, error) {
	if !d.volcanoJobWebhook.Load() {
		return "", nil // no Volcano webhook to leave the refusal to: hyperbatch judges every Job
	}
	spec := &job.Spec
	switch {
	case spec.MinAvailable < 0:
		return "spec.minAvailable < 0", nil
	case spec.MaxRetry < 0:
		return "spec.maxRetry < 0", nil
	case spec.TTLSecondsAfterFinished != nil && *spec.TTLSecondsAfterFinished < 0:
		return "spec.ttlSecondsAfterFinished < 0", nil
	case len(spec.Tasks) == 0:
		return "no tasks", nil
	}
	var total int32
	names := map[string]bool{}
	for i := range spec.Tasks {
		t := &spec.Tasks[i]
		switch {
		case t.Replicas < 0:
			return fmt.Sprintf("spec.tasks[%d].replicas < 0", i), nil
		case t.MinAvailable != nil && (*t.MinAvailable < 0 || *t.MinAvailable > t.Replicas):
			return fmt.Sprintf("spec.tasks[%d].minAvailable out of range", i), nil
		case len(validation.IsDNS1123Label(t.Name)) > 0:
			return fmt.Sprintf("spec.tasks[%d].name %q is not a DNS-1123 label", i, t.Name), nil
		case names[t.Name]:
			return fmt.Sprintf("spec.tasks[%d].name %q is duplicated", i, t.Name), nil
		case len(validation.IsQualifiedName(fmt.Sprintf("%s-%s-%d", job.Name, t.Name, i))) > 0:
			return fmt.Sprintf("the pod names of spec.tasks[%d] are not qualified names", i), nil
		}
		names[t.Name] = true
		total += t.Replicas
	}
	if total < spec.MinAvailable {
		return "spec.minAvailable is greater than the tasks' replicas", nil
	}
	if job.Name != "" && len(validation.IsQualifiedName(job.Name)) > 0 {
		return "metadata.name is not a qualified name", nil
	}
	return d.volcanoQueueRefusal(ctx, spec.Queue)
}

// volcanoQueueRefusal is the Queue part of volcanoRefusal: Volcano looks spec.queue up by its exact
// name among the cluster Queues and refuses a Job whose Queue is missing or not Open. A reference
// to a NamespaceQueue ("namespace/...") or any other form with a "/" is left to Volcano.
func (d *deps) volcanoQueueRefusal(ctx context.Context, queue string) (string, error) {
	if queue == "" || strings.Contains(queue, "/") || d.queues == nil {
		return "", nil
	}
	q, err := cached(ctx, d.queues, d.reader, queue, func() *schedulingv1beta1.Queue { return &schedulingv1beta1.Queue{} })
	if err == nil && q == nil && d.live != nil {
		// A Queue created a moment ago may not be cached yet; Volcano must not look refused for it.
		q, err = cached(ctx, nil, d.live, queue, func() *schedulingv1beta1.Queue { return &schedulingv1beta1.Queue{} })
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("reading Queue %q: %w", queue, err)
	case q == nil:
		return fmt.Sprintf("Queue %q does not exist", queue), nil
	case q.Status.State != schedulingv1beta1.QueueStateOpen:
		return fmt.Sprintf("Queue %q is %q, not Open", queue, q.Status.State), nil
	}
	return "", nil
}

// VolcanoJobWebhookName is the name of Volcano's job validation webhook (webhook-manager, in its
// configuration volcano-admission-service-jobs-validate).
const VolcanoJobWebhookName = "validatejob.volcano.sh"

// hasVolcanoJobWebhook reports whether a ValidatingWebhookConfiguration of the store registers
// Volcano's job validation.
func hasVolcanoJobWebhook(s toolscache.Store) bool {
	for _, item := range s.List() {
		if vwc, ok := item.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			for i := range vwc.Webhooks {
				if vwc.Webhooks[i].Name == VolcanoJobWebhookName {
					return true
				}
			}
		}
	}
	return false
}
