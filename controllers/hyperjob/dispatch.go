package hyperjob

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// All-or-nothing across children (docs/multicluster.md, "A HyperJob's journey").
//
// Karmada has no gang across clusters: each child's ResourceBinding is scheduled and dispatched on
// its own, so a member could start part of a HyperJob whose other parts have nowhere to go. The
// lever is the PropagationPolicy's spec.suspension.dispatching: Karmada's scheduler still picks a
// cluster for a suspended binding, but no Work reaches a member. So, where Karmada's
// ResourceBindings are served (the control plane), every child's PropagationPolicy is created with
// dispatching suspended, and the suspension is lifted from all of them at once when every child in
// the plan has a ResourceBinding with a scheduled cluster. The decision is made once: a HyperJob
// any of whose PropagationPolicies is not suspended has been released, and children added later
// (scaling up) are dispatched as they are scheduled.

// ReasonDispatchingChildren is the Event of the release, naming each child's member cluster.
const ReasonDispatchingChildren = "DispatchingChildren"

// bindingsByChild maps child Volcano Job names to their ResourceBindings (Karmada names a
// binding after its resource template, but the reference in its spec is what binds them).
func bindingsByChild(list []workv1alpha2.ResourceBinding) map[string]*workv1alpha2.ResourceBinding {
	out := make(map[string]*workv1alpha2.ResourceBinding, len(list))
	for i := range list {
		rb := &list[i]
		r := rb.Spec.Resource
		if r.Kind == "Job" && r.APIVersion == batchv1alpha1.SchemeGroupVersion.String() {
			out[r.Name] = rb
		}
	}
	return out
}

// suspended reports whether a PropagationPolicy holds its bindings back from every member.
func suspended(pp *policyv1alpha1.PropagationPolicy) bool {
	s := pp.Spec.Suspension
	return s != nil && s.Dispatching != nil && *s.Dispatching
}

// dispatchDecision is the gate's verdict for one pass.
type dispatchDecision struct {
	// release: the children's PropagationPolicies are to be unsuspended (or stay so).
	release bool
	// releasing: this pass lifts the suspension (the Event is due).
	releasing bool
	// clusters: child → its scheduled member clusters, for the children that have one.
	clusters map[string][]string
	// waiting: children of the plan without a scheduled cluster.
	waiting []string
}

// decideDispatch applies the gate to a plan. skip holds the children that are not to exist (finished
// and gone); pps are the HyperJob's PropagationPolicies; bindings by child name.
func decideDispatch(plan *Plan, skip map[string]bool, pps map[string]*policyv1alpha1.PropagationPolicy, bindings map[string]*workv1alpha2.ResourceBinding) dispatchDecision {
	d := dispatchDecision{clusters: map[string][]string{}}
	releasedBefore := false
	for _, pp := range pps {
		if pp.DeletionTimestamp == nil && !suspended(pp) {
			releasedBefore = true
			break
		}
	}
	for i := range plan.children {
		name := plan.children[i].name
		if skip[name] {
			continue
		}
		rb := bindings[name]
		if rb == nil || len(rb.Spec.Clusters) == 0 {
			d.waiting = append(d.waiting, name)
			continue
		}
		for _, c := range rb.Spec.Clusters {
			d.clusters[name] = append(d.clusters[name], c.Name)
		}
	}
	d.release = releasedBefore || len(d.waiting) == 0
	d.releasing = d.release && !releasedBefore && len(plan.children) > 0
	return d
}

// suspend sets dispatching suspended on a child's PropagationPolicy (its own copy, built per child
// by BuildPlan). The spec hash label is left as planned: it names the placement, and the
// suspension is compared on its own (ppDrifted), so holding 1,000 children costs no re-hashing.
func suspend(c *child) {
	c.pp.Spec.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
}

// releaseMessage names each child's member cluster: "member1: a-0, a-1; member2: b-0".
func releaseMessage(clusters map[string][]string) string {
	byCluster := map[string][]string{}
	for child, cs := range clusters {
		key := strings.Join(cs, "+")
		byCluster[key] = append(byCluster[key], child)
	}
	keys := make([]string, 0, len(byCluster))
	for k := range byCluster {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		cs := byCluster[k]
		slices.Sort(cs)
		shown := cs[:min(len(cs), maxNamesInEvent)]
		more := ""
		if len(cs) > len(shown) {
			more = fmt.Sprintf(", … %d more", len(cs)-len(shown))
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s%s)", k, len(cs), strings.Join(shown, ", "), more))
	}
	return strings.Join(parts, "; ")
}
