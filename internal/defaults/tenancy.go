package defaults

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Tenancy: a WorkloadPolicy's allowedQueues and allowedClusters. The validating webhook and the
// controllers that create workloads (HyperJob children, JobSet PodGroups) all ask QueueRefusal and
// ClusterRefusal, so a namespace the webhooks skip gets no more than one they admit.

// Refusal says why a queue or a set of clusters is not allowed in a namespace. Its Error is the
// message the webhook and the controllers show.
type Refusal struct {
	// What is refused, as shown: `queue "gpu"`, `cluster "c3"`, or a description.
	What      string
	Namespace string
	// Policy refuses it, allowing only Allowed (a copy).
	Policy  string
	Allowed []string
	// PolicyInvalid: Policy's namespaceSelector cannot be parsed, so it may govern the namespace and
	// its allowed lists apply until it is fixed (fail closed).
	PolicyInvalid bool
}

func (r *Refusal) Error() string {
	quoted := make([]string, len(r.Allowed))
	for i, a := range r.Allowed {
		quoted[i] = strconv.Quote(a)
	}
	verb := "is"
	if strings.HasPrefix(r.What, "clusters ") {
		verb = "are"
	}
	msg := fmt.Sprintf("%s %s not allowed in namespace %q: WorkloadPolicy %q allows only %s", r.What, verb, r.Namespace, r.Policy, strings.Join(quoted, ", "))
	if r.PolicyInvalid {
		msg += " (its namespaceSelector is invalid, so it may govern this namespace: its allowed lists apply until it is fixed)"
	}
	return msg
}

// bound is a policy whose allowed lists apply to a namespace.
type bound struct {
	policy  *hbv1.WorkloadPolicy
	invalid bool
}

// binding returns the policies whose allowed lists apply to a workload in ns, in rank order: every
// invalid policy ranked above the governing one (all invalid policies when none governs), then the
// governing policy. An invalid policy's selector cannot tell whether it would govern ns, so its
// allowed lists apply as if it did: it fails closed.
func (p *Policies) binding(ns Namespace) []bound {
	if p == nil {
		return nil
	}
	gov := p.MatchNamespace(ns)
	var out []bound
	for _, inv := range p.invalid {
		if gov == nil || ranksBefore(inv, gov) {
			out = append(out, bound{policy: inv, invalid: true})
		}
	}
	if gov != nil {
		out = append(out, bound{policy: gov})
	}
	return out
}

// InvalidPolicies names the policies whose namespaceSelector cannot be parsed.
func (p *Policies) InvalidPolicies() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.invalid))
	for i, pol := range p.invalid {
		out[i] = pol.Name
	}
	return out
}

// QueueRefusal says why a workload in ns may not use queue, or nil when it may. Every binding policy
// with allowedQueues must list it. References are compared after NormalizeQueue, and an empty queue
// is checked as Volcano's "default" queue, where Volcano puts a workload that names none.
func QueueRefusal(queue string, ns Namespace, pols *Policies) *Refusal {
	q := NormalizeQueue(queue)
	written := q
	if q == "" {
		q = schedulingv1beta1.DefaultQueue
	}
	for _, b := range pols.binding(ns) {
		allowed := b.policy.Spec.AllowedQueues
		if len(allowed) == 0 || slices.ContainsFunc(allowed, func(a string) bool { return NormalizeQueue(a) == q }) {
			continue
		}
		shown := "queue " + strconv.Quote(written) // built only for a refusal: this runs on every admission
		if written == "" {
			shown = fmt.Sprintf(`queue "" (Volcano's %q queue)`, schedulingv1beta1.DefaultQueue)
		}
		return &Refusal{What: shown, Namespace: ns.Name, Policy: b.policy.Name, Allowed: slices.Clone(allowed), PolicyInvalid: b.invalid}
	}
	return nil
}

// ClusterRefusal says why a workload in ns may not be propagated to clusters, or nil when it may.
// Every binding policy with allowedClusters must list each of them; no clusters at all means every
// cluster, which such a policy refuses.
func ClusterRefusal(clusters []string, ns Namespace, pols *Policies) *Refusal {
	for _, b := range pols.binding(ns) {
		allowed := b.policy.Spec.AllowedClusters
		if len(allowed) == 0 {
			continue
		}
		ref := &Refusal{Namespace: ns.Name, Policy: b.policy.Name, Allowed: slices.Clone(allowed), PolicyInvalid: b.invalid}
		if len(clusters) == 0 {
			ref.What = "naming no clusters (which propagates to every cluster)"
			return ref
		}
		var bad []string
		for _, c := range clusters {
			if !slices.Contains(allowed, c) && !slices.Contains(bad, strconv.Quote(c)) {
				bad = append(bad, strconv.Quote(c))
			}
		}
		if len(bad) > 0 {
			ref.What = "cluster " + strings.Join(bad, ", ")
			if len(bad) > 1 {
				ref.What = "clusters " + strings.Join(bad, ", ")
			}
			return ref
		}
	}
	return nil
}

// QueueRule is one policy whose allowedQueues apply to a namespace's workloads (see QueueRefusal),
// in the form a check that runs elsewhere (the apiserver's admission policies) needs: the allowed
// references normalized, and the refusal message without its first words.
type QueueRule struct {
	Policy  string
	Invalid bool
	// Allowed are the policy's allowedQueues after NormalizeQueue.
	Allowed []string
	// Message is Refusal.Error() for this policy with an empty What: " is not allowed in namespace
	// ...". A refusal of queue q reads `queue "q"` followed by Message.
	Message string
}

// QueueRules are the rules QueueRefusal applies in ns, in the order it applies them; policies
// without allowedQueues are left out. A queue is allowed when every rule lists it; the first rule
// that does not is the refusal.
func QueueRules(ns Namespace, pols *Policies) []QueueRule {
	var out []QueueRule
	for _, b := range pols.binding(ns) {
		allowed := b.policy.Spec.AllowedQueues
		if len(allowed) == 0 {
			continue
		}
		norm := make([]string, len(allowed))
		for i, a := range allowed {
			norm[i] = NormalizeQueue(a)
		}
		ref := &Refusal{Namespace: ns.Name, Policy: b.policy.Name, Allowed: slices.Clone(allowed), PolicyInvalid: b.invalid}
		out = append(out, QueueRule{Policy: b.policy.Name, Invalid: b.invalid, Allowed: norm, Message: ref.Error()})
	}
	return out
}
