package defaults

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func propagationPolicy(annotations map[string]string, deps bool, pl policyv1alpha1.Placement) *policyv1alpha1.PropagationPolicy {
	return &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: "a", Annotations: annotations},
		Spec:       policyv1alpha1.PropagationSpec{Placement: pl, PropagateDeps: deps},
	}
}

func TestPropagationPolicy(t *testing.T) {
	const all = "team-a/clusterNames,replicaScheduling,spreadConstraints,propagateDeps"
	defaulted := policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b"}, ExcludeClusters: []string{"c"}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: "Aggregated",
		},
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "cluster", MaxGroups: 1, MinGroups: 1}},
	}
	user := policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "yes"}}},
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated,
		},
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "region", MaxGroups: 2}},
	}
	noDeps := policy("no-deps", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.Propagation = &hbv1.Propagation{PropagateDeps: ptr.To(false), ReplicaDivisionPreference: "Weighted"}
	})

	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *policyv1alpha1.PropagationPolicy
		want *policyv1alpha1.PropagationPolicy
		res  wantResult
	}{{
		name: "defaults applied (exclusions alone select nothing)",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: propagationPolicy(nil, false, policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{ExcludeClusters: []string{"c"}},
		}),
		want: propagationPolicy(map[string]string{hbv1.DefaultedByAnnotation: all}, true, defaulted),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.placement.clusterAffinity.clusterNames",
			"spec.placement.replicaScheduling", "spec.placement.spreadConstraints", "spec.propagateDeps"}, DefaultedBy: all},
	}, {
		name: "user values kept",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   propagationPolicy(nil, true, user),
		want: propagationPolicy(nil, true, user),
		res:  wantResult{Policy: "team-a"},
	}, {
		name: "clusterAffinities block clusterNames; Divided without preference gets one",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: propagationPolicy(nil, true, policyv1alpha1.Placement{
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "x"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{},
			SpreadConstraints: user.SpreadConstraints,
		}),
		want: propagationPolicy(map[string]string{hbv1.DefaultedByAnnotation: "team-a/replicaScheduling"}, true, policyv1alpha1.Placement{
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "x"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: "Aggregated",
			},
			SpreadConstraints: user.SpreadConstraints,
		}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.placement.replicaScheduling.replicaDivisionPreference"},
			DefaultedBy: "team-a/replicaScheduling"},
	}, {
		name: "propagateDeps false in the policy writes nothing",
		pols: []hbv1.WorkloadPolicy{noDeps},
		ns:   nsA,
		in:   propagationPolicy(nil, false, policyv1alpha1.Placement{}),
		want: propagationPolicy(map[string]string{hbv1.DefaultedByAnnotation: "no-deps/replicaScheduling"}, false, policyv1alpha1.Placement{
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: "Weighted",
			},
		}),
		res: wantResult{Policy: "no-deps", Fields: []string{"spec.placement.replicaScheduling"}, DefaultedBy: "no-deps/replicaScheduling"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b"},
		in:   propagationPolicy(nil, false, policyv1alpha1.Placement{}),
		want: propagationPolicy(nil, false, policyv1alpha1.Placement{}),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, PropagationPolicy(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*policyv1alpha1.PropagationPolicy).DeepCopy, func(pp *policyv1alpha1.PropagationPolicy) Result {
				return PropagationPolicy(pp, tc.ns, pols)
			})
		})
	}
}
