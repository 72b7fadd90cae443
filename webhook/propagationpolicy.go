package webhook

import (
	"context"
	"slices"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Karmada PropagationPolicies (policy.karmada.io/v1alpha1): placement.clusterAffinity.clusterNames,
// replicaScheduling, spreadConstraints and propagateDeps are defaulted on CREATE and carried over on
// UPDATE.
//
// A PropagationPolicy lives in the Karmada control plane. Where that is a separate karmada-apiserver,
// the configurations for this kind must be registered there too (see docs/webhooks.md).
func (d *deps) propagationPolicyMutator() *mutator[*policyv1alpha1.PropagationPolicy] {
	return &mutator[*policyv1alpha1.PropagationPolicy]{
		handlerBase: base[policyv1alpha1.PropagationPolicy](d, KindPropagationPolicy),
		apply:       engineOf[*policyv1alpha1.PropagationPolicy](KindPropagationPolicy),
		refused:     d.propagationPolicyValidator().refuses,
	}
}

// PropagationPolicies are checked against the governing policy's allowedClusters: the cluster
// affinity (placement.clusterAffinity, or each term of placement.clusterAffinities) must name its
// clusters, all of them allowed. A label or field selector only narrows what clusterNames select
// (Karmada ANDs them), so it cannot widen the set. On UPDATE, unchanged cluster lists are not
// judged again, so tightening a policy never blocks updates of policies admitted before.
func (d *deps) propagationPolicyValidator() *validator[*policyv1alpha1.PropagationPolicy] {
	return &validator[*policyv1alpha1.PropagationPolicy]{
		handlerBase: base[policyv1alpha1.PropagationPolicy](d, KindPropagationPolicy),
		check: func(_ context.Context, c *checker, pp, old *policyv1alpha1.PropagationPolicy, update bool) error {
			paths, lists := affinityClusters(pp)
			_, oldLists := affinityClusters(old)
			if update && slices.EqualFunc(lists, oldLists, slices.Equal[[]string]) {
				return nil
			}
			for i, p := range paths {
				if ref := defaults.ClusterRefusal(lists[i], c.ns, c.pols); ref != nil {
					c.errs = append(c.errs, field.Forbidden(p, ref.Error()))
				}
			}
			return nil
		},
	}
}

// affinityClusters lists the cluster names of each cluster affinity of a PropagationPolicy, with the
// path of each list: placement.clusterAffinity (also when absent, which selects every cluster), or
// each placement.clusterAffinities term when there are terms.
func affinityClusters(pp *policyv1alpha1.PropagationPolicy) ([]*field.Path, [][]string) {
	pl := &pp.Spec.Placement
	base := field.NewPath("spec", "placement")
	if len(pl.ClusterAffinities) == 0 {
		var names []string
		if pl.ClusterAffinity != nil {
			names = pl.ClusterAffinity.ClusterNames
		}
		return []*field.Path{base.Child("clusterAffinity", "clusterNames")}, [][]string{names}
	}
	paths := make([]*field.Path, len(pl.ClusterAffinities))
	lists := make([][]string, len(pl.ClusterAffinities))
	for i := range pl.ClusterAffinities {
		paths[i] = base.Child("clusterAffinities").Index(i).Child("clusterNames")
		lists[i] = pl.ClusterAffinities[i].ClusterNames
	}
	return paths, lists
}
