package defaults

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Namespace is what the engine needs to know about a workload's namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// NamespaceOf describes a Namespace object for the engine.
func NamespaceOf(ns *corev1.Namespace) Namespace {
	if ns == nil {
		return Namespace{}
	}
	return Namespace{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations}
}

// Policies is a set of WorkloadPolicies with their selectors parsed and their order fixed once.
// It is immutable after NewPolicies and safe for concurrent use. A nil *Policies matches nothing.
type Policies struct {
	items []compiledPolicy
	// invalid are the policies whose namespaceSelector cannot be parsed, in the same order. They
	// default nothing, but their allowed lists fail closed (see binding).
	invalid []*hbv1.WorkloadPolicy
}

type compiledPolicy struct {
	policy   *hbv1.WorkloadPolicy
	selector labels.Selector
}

// NewPolicies copies list and parses every namespaceSelector. A policy whose selector is invalid is
// left out and reported in the returned error; the returned *Policies holds the valid ones and is
// never nil, so callers may log the error and go on.
func NewPolicies(list []hbv1.WorkloadPolicy) (*Policies, error) {
	p := &Policies{items: make([]compiledPolicy, 0, len(list))}
	var errs []error
	for i := range list {
		pol := list[i].DeepCopy()
		if PriorityClassWithheld(pol) {
			pol.Spec.Defaults.PriorityClassName = ""
		}
		sel, err := NamespaceSelector(pol)
		if err != nil {
			errs = append(errs, fmt.Errorf("WorkloadPolicy %q: %w", pol.Name, err))
			p.invalid = append(p.invalid, pol)
			continue
		}
		p.items = append(p.items, compiledPolicy{policy: pol, selector: sel})
	}
	// Highest weight first; equal weights by name, lexically smallest first. Stable keeps the input
	// order for exact duplicates so the choice is still deterministic.
	sort.SliceStable(p.items, func(i, j int) bool { return ranksBefore(p.items[i].policy, p.items[j].policy) })
	sort.SliceStable(p.invalid, func(i, j int) bool { return ranksBefore(p.invalid[i], p.invalid[j]) })
	return p, errors.Join(errs...)
}

// PriorityClassWithheld says whether the policy's priorityClassName default is not applied: the
// workloadpolicy controller found, for the policy's current generation, that it names no
// PriorityClass (Ready=False, reason PriorityClassNotFound). A default that every Pod would be
// refused with is left out; the policy's other defaults still apply.
func PriorityClassWithheld(p *hbv1.WorkloadPolicy) bool {
	c := apimeta.FindStatusCondition(p.Status.Conditions, hbv1.PolicyConditionReady)
	return p.Spec.Defaults.PriorityClassName != "" && c != nil && c.Status == metav1.ConditionFalse &&
		c.Reason == hbv1.PolicyReasonPriorityClassNotFound && c.ObservedGeneration == p.Generation
}

// ranksBefore orders policies: highest weight first, equal weights by name.
func ranksBefore(a, b *hbv1.WorkloadPolicy) bool {
	if a.Spec.Weight != b.Spec.Weight {
		return a.Spec.Weight > b.Spec.Weight
	}
	return a.Name < b.Name
}

// NamespaceSelector parses a policy's spec.namespaceSelector; no selector matches every namespace.
// The engine (NewPolicies) and the workloadpolicy controller's status both use it.
func NamespaceSelector(p *hbv1.WorkloadPolicy) (labels.Selector, error) {
	if p.Spec.NamespaceSelector == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.namespaceSelector is invalid: %w", err)
	}
	return sel, nil
}

// Len is the number of usable policies.
func (p *Policies) Len() int {
	if p == nil {
		return 0
	}
	return len(p.items)
}

// Match returns the governing policy for a namespace with these labels: the matching policy with
// the highest spec.weight, ties broken by the lexically smallest name. It returns nil when none
// matches. The result is shared; callers must not modify it.
func (p *Policies) Match(nsLabels map[string]string) *hbv1.WorkloadPolicy {
	if p == nil {
		return nil
	}
	set := labels.Set(nsLabels)
	for _, it := range p.items {
		if it.selector.Matches(set) {
			return it.policy
		}
	}
	return nil
}

// MatchNamespace is Match on the namespace's labels, with kubernetes.io/metadata.name added from
// ns.Name when missing, as the apiserver does for every Namespace.
func (p *Policies) MatchNamespace(ns Namespace) *hbv1.WorkloadPolicy {
	if ns.Name == "" || ns.Labels[corev1.LabelMetadataName] != "" {
		return p.Match(ns.Labels)
	}
	withName := make(map[string]string, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		withName[k] = v
	}
	withName[corev1.LabelMetadataName] = ns.Name
	return p.Match(withName)
}

// validOperators are the label selector operators, in the order messages list them.
var validOperators = []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
	metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}

// ValidateNamespaceSelector finds everything metav1.LabelSelectorAsSelector would refuse in a
// policy's namespaceSelector, one error per field, each naming the fix: operators (case-sensitive),
// values required by In/NotIn and forbidden for Exists/DoesNotExist, label key and value syntax.
// The validating webhook refuses such a policy; NewPolicies would leave it out.
func ValidateNamespaceSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	var errs field.ErrorList
	for i, e := range sel.MatchExpressions {
		if !slices.Contains(validOperators, e.Operator) {
			msg := "must be one of In, NotIn, Exists, DoesNotExist"
			for _, op := range validOperators {
				if strings.EqualFold(string(op), string(e.Operator)) {
					msg += fmt.Sprintf(" (operators are case-sensitive: write %s)", op)
				}
			}
			errs = append(errs, field.Invalid(path.Child("matchExpressions").Index(i).Child("operator"), string(e.Operator), msg))
		}
	}
	for _, err := range metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path) {
		if strings.HasSuffix(err.Field, ".operator") {
			continue // reported above, with the fix
		}
		errs = append(errs, err)
	}
	return errs
}
