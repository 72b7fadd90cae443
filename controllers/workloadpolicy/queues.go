package workloadpolicy

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// ConditionQueuesExist says whether every Volcano Queue the policy names (spec.defaults.queue and
// spec.allowedQueues) exists. It is a warning, not a validity check: the policy stays Ready and in
// force, but a workload defaulted to, or allowed only, a missing queue waits in Pending.
const ConditionQueuesExist = "QueuesExist"

// Reasons of ConditionQueuesExist.
const (
	ReasonQueuesFound   = "QueuesFound"
	ReasonQueueNotFound = "QueueNotFound"
)

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=queues,verbs=get;list;watch

// queueRef is one queue the policy names, and where.
type queueRef struct {
	name, field string
}

// clusterQueueRefs are the cluster-scoped Queues a policy names. References to a NamespaceQueue
// ("namespace/<name>") are left out: that queue lives in each governed namespace, not once.
func clusterQueueRefs(p *hbv1.WorkloadPolicy) []queueRef {
	var refs []queueRef
	add := func(q, field string) {
		if name, namespaced := defaults.SplitQueue(q); name != "" && !namespaced {
			refs = append(refs, queueRef{name: name, field: field})
		}
	}
	add(p.Spec.Defaults.Queue, "spec.defaults.queue")
	for i, q := range p.Spec.AllowedQueues {
		add(q, "spec.allowedQueues["+strconv.Itoa(i)+"]")
	}
	return refs
}

// queuesCondition looks every cluster Queue the policy names up in the cache.
func (r *Reconciler) queuesCondition(ctx context.Context, p *hbv1.WorkloadPolicy) (metav1.Condition, error) {
	cond := metav1.Condition{Type: ConditionQueuesExist, Status: metav1.ConditionTrue, Reason: ReasonQueuesFound,
		Message: "every Volcano Queue the policy names exists", ObservedGeneration: p.Generation}
	var missing []string
	for _, ref := range clusterQueueRefs(p) {
		var q schedulingv1beta1.Queue
		err := r.client.Get(ctx, client.ObjectKey{Name: ref.name}, &q)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("%q (%s)", ref.name, ref.field))
		case err != nil:
			return cond, fmt.Errorf("reading Volcano Queue %s named in %s: %w", ref.name, ref.field, err)
		}
	}
	if len(missing) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonQueueNotFound
		cond.Message = fmt.Sprintf("Volcano Queue %s does not exist: workloads defaulted to or allowed only a missing queue wait in Pending; "+
			"create the Queue (kind Queue, scheduling.volcano.sh/v1beta1) or correct the policy", strings.Join(missing, ", "))
	}
	return cond, nil
}
