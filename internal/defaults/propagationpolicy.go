package defaults

import (
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
)

// PropagationPolicy fills a Karmada PropagationPolicy's placement from the policy's propagation
// defaults: clusterAffinity.clusterNames, replicaScheduling (Divided with the policy's division
// preference), a cluster spread constraint of at most maxClusters clusters (minGroups 1), and
// propagateDeps, each only where the PropagationPolicy leaves it unset (see the package doc). The
// spread cap is skipped (Result.Skips) when the placement itself names more clusters than it allows.
func PropagationPolicy(pp *policyv1alpha1.PropagationPolicy, ns Namespace, pols *Policies) Result {
	if pp == nil {
		return Result{}
	}
	r := begin(ns, pols)
	p := r.defaults().Propagation
	if p == nil {
		return r.finish(&pp.ObjectMeta)
	}
	src := r.policySource()
	pl := &pp.Spec.Placement
	// What the user's placement names, before any default joins it.
	named, where := namedClusters(pl)

	if len(p.ClusterNames) > 0 && len(pl.ClusterAffinities) == 0 && selectsNothing(pl.ClusterAffinity) {
		if pl.ClusterAffinity == nil {
			pl.ClusterAffinity = &policyv1alpha1.ClusterAffinity{}
		}
		pl.ClusterAffinity.ClusterNames = slices.Clone(p.ClusterNames)
		r.record("spec.placement.clusterAffinity.clusterNames", FieldClusterNames, src)
	}

	if pref := policyv1alpha1.ReplicaDivisionPreference(p.ReplicaDivisionPreference); pref != "" {
		rs := pl.ReplicaScheduling
		switch {
		case rs == nil:
			pl.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: pref,
			}
			r.record("spec.placement.replicaScheduling", FieldReplicaScheduling, src)
		case rs.ReplicaDivisionPreference == "" &&
			(rs.ReplicaSchedulingType == "" || rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDivided):
			// "" is Divided by Karmada's CRD default; Duplicated has no division to prefer.
			rs.ReplicaSchedulingType = policyv1alpha1.ReplicaSchedulingTypeDivided
			rs.ReplicaDivisionPreference = pref
			r.record("spec.placement.replicaScheduling.replicaDivisionPreference", FieldReplicaScheduling, src)
		}
	}

	if p.MaxClusters != nil && *p.MaxClusters >= 1 && len(pl.SpreadConstraints) == 0 && len(named) > int(*p.MaxClusters) {
		r.skip("spec.placement.spreadConstraints", FieldSpreadConstraints, fmt.Sprintf("maxClusters %d", *p.MaxClusters),
			fmt.Sprintf("%s, which names %d clusters (%s)", where, len(named), strings.Join(named, ", ")))
	} else if p.MaxClusters != nil && *p.MaxClusters >= 1 && len(pl.SpreadConstraints) == 0 {
		pl.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{
			SpreadByField: policyv1alpha1.SpreadByFieldCluster,
			MaxGroups:     int(*p.MaxClusters),
			MinGroups:     1,
		}}
		r.record("spec.placement.spreadConstraints", FieldSpreadConstraints, src)
	}

	if p.PropagateDeps != nil && *p.PropagateDeps && !pp.Spec.PropagateDeps {
		pp.Spec.PropagateDeps = true
		r.record("spec.propagateDeps", FieldPropagateDeps, src)
	}
	return r.finish(&pp.ObjectMeta)
}

// selectsNothing reports whether a cluster affinity is absent or names no clusters by any means
// (ExcludeClusters alone still leaves every other cluster selected).
func selectsNothing(a *policyv1alpha1.ClusterAffinity) bool {
	return a == nil || (a.LabelSelector == nil && a.FieldSelector == nil && len(a.ClusterNames) == 0)
}
