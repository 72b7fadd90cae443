package workloadpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// priorityClassCondition is Ready=False (PriorityClassNotFound) when spec.defaults.priorityClassName
// names no PriorityClass, nil otherwise. The defaulting engine reads that condition and leaves the
// class out of every workload (defaults.PriorityClassWithheld): with it, every Pod of the policy's
// namespaces would be refused.
func (r *Reconciler) priorityClassCondition(ctx context.Context, p *hbv1.WorkloadPolicy) (*metav1.Condition, error) {
	name := p.Spec.Defaults.PriorityClassName
	if name == "" {
		return nil, nil
	}
	var pc schedulingv1.PriorityClass
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, &pc)
	switch {
	case err == nil:
		return nil, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading PriorityClass %s named in spec.defaults.priorityClassName: %w", name, err)
	}
	return &metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPriorityClassNotFound,
		ObservedGeneration: p.Generation, Message: fmt.Sprintf(
			"PriorityClass %q (spec.defaults.priorityClassName) does not exist: the policy's other defaults apply, but no workload gets "+
				"this priorityClassName until the PriorityClass exists (every Pod would be refused with it); "+
				"create the PriorityClass (kind PriorityClass, scheduling.k8s.io/v1) or correct the policy", name)}, nil
}

// tieCondition is WeightTie=True, naming the winners, when a policy of the same weight governs some
// of matched (the namespaces p selects) because its name is smaller.
func (r *Reconciler) tieCondition(ctx context.Context, p *hbv1.WorkloadPolicy, matched []corev1.Namespace) (metav1.Condition, error) {
	cond := metav1.Condition{Type: ConditionWeightTie, Status: metav1.ConditionFalse, Reason: ReasonNoTie, ObservedGeneration: p.Generation,
		Message: "no policy of the same weight wins any namespace this policy selects"}
	if len(matched) == 0 {
		return cond, nil
	}
	var list hbv1.WorkloadPolicyList
	if err := r.client.List(ctx, &list); err != nil {
		return cond, fmt.Errorf("listing WorkloadPolicies: %w", err)
	}
	var peers []hbv1.WorkloadPolicy
	for i := range list.Items {
		if list.Items[i].Spec.Weight >= p.Spec.Weight {
			peers = append(peers, list.Items[i])
		}
	}
	pols, _ := defaults.NewPolicies(peers) // a policy whose selector is invalid governs nothing
	lost := map[string][]string{}          // winner -> namespaces
	for i := range matched {
		w := pols.MatchNamespace(defaults.NamespaceOf(&matched[i]))
		if w != nil && w.Name != p.Name && w.Spec.Weight == p.Spec.Weight {
			lost[w.Name] = append(lost[w.Name], matched[i].Name)
		}
	}
	if len(lost) == 0 {
		return cond, nil
	}
	winners := make([]string, 0, len(lost))
	for w := range lost {
		winners = append(winners, w)
	}
	sort.Strings(winners)
	var parts []string
	for _, w := range winners {
		parts = append(parts, fmt.Sprintf("WorkloadPolicy %q governs %s", w, namespaceList(lost[w])))
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, ReasonLosesTie
	cond.Message = fmt.Sprintf("%s: same weight %d, and ties go to the smaller name, so this policy's defaults and allowed lists do not apply there; "+
		"give one of the policies a higher spec.weight or make their namespaceSelectors disjoint", strings.Join(parts, "; "), p.Spec.Weight)
	return cond, nil
}

// namespaceList names up to 5 namespaces ("namespace ml", "namespaces a, b and 3 more").
func namespaceList(names []string) string {
	sort.Strings(names)
	if len(names) == 1 {
		return "namespace " + names[0]
	}
	if len(names) <= 5 {
		return "namespaces " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("namespaces %s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
