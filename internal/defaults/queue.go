package defaults

import (
	"slices"
	"strings"

	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// NamespaceQueuePrefix marks a queue reference to a Volcano NamespaceQueue in the workload's own
// namespace ("namespace/<name>"); a reference without it names a cluster-scoped Queue.
const NamespaceQueuePrefix = "namespace/"

// NormalizeQueue returns the canonical form of a Volcano queue reference, for comparison and for
// writing defaults. It trims surrounding space and the space after "namespace/"; it does not strip
// the "namespace/" prefix, because "namespace/gpu" (the NamespaceQueue gpu of the workload's own
// namespace) and "gpu" (the cluster Queue gpu) are different queues in Volcano. "" means unset.
func NormalizeQueue(q string) string {
	q = strings.TrimSpace(q)
	if rest, ok := strings.CutPrefix(q, NamespaceQueuePrefix); ok {
		return NamespaceQueuePrefix + strings.TrimSpace(rest)
	}
	return q
}

// SplitQueue parses a queue reference into the queue object's name and whether it is a
// NamespaceQueue (in the workload's namespace) rather than a cluster-scoped Queue.
func SplitQueue(q string) (name string, namespaced bool) {
	q = NormalizeQueue(q)
	if rest, ok := strings.CutPrefix(q, NamespaceQueuePrefix); ok {
		return rest, true
	}
	return q, false
}

// queueUnsetInSpec reports whether a spec.queue value (Volcano Job, PodGroup, HyperJob template)
// is unset: empty, or Volcano's own default that its CRD and webhook write for an omitted queue.
func queueUnsetInSpec(q string) bool {
	q = NormalizeQueue(q)
	return q == "" || q == schedulingv1beta1.DefaultQueue
}

// queueDefault is the queue to fill into a workload that has none, and its defaulted-by source:
// the namespace annotation first, then the governing policy. "" when neither has one.
func (r *run) queueDefault() (queue string, source Source) {
	if q := NormalizeQueue(r.ns.Annotations[QueueNameAnnotation]); q != "" {
		return q, Source{Kind: SourceNamespace, Name: r.ns.Name}
	}
	if q := NormalizeQueue(r.defaults().Queue); q != "" {
		return q, r.policySource()
	}
	return "", Source{}
}

// fillSpecQueue fills a spec.queue field that is unset in the sense of queueUnsetInSpec.
func (r *run) fillSpecQueue(dst *string, path string) {
	if !queueUnsetInSpec(*dst) || (r.explicitQueue && NormalizeQueue(*dst) != "") {
		return
	}
	if q, src := r.queueDefault(); q != "" && q != *dst {
		*dst = q
		r.record(path, FieldQueue, src)
	}
}

// AllowedQueue tells whether a workload in ns may use queue (QueueRefusal is nil). It returns the
// refusing policy's name and allowedQueues (a copy) or, when allowed, the governing policy's; with
// no governing policy, or one without allowedQueues, every queue is allowed unless an invalid policy
// refuses it (see QueueRefusal).
func AllowedQueue(queue string, ns Namespace, pols *Policies) (allowed bool, policy string, allowedList []string) {
	if ref := QueueRefusal(queue, ns, pols); ref != nil {
		return false, ref.Policy, ref.Allowed
	}
	pol := pols.MatchNamespace(ns)
	if pol == nil {
		return true, "", nil
	}
	if len(pol.Spec.AllowedQueues) == 0 {
		return true, pol.Name, nil
	}
	return true, pol.Name, slices.Clone(pol.Spec.AllowedQueues)
}
