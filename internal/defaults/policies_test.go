package defaults

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func TestMatch(t *testing.T) {
	sel := func(k, v string) func(*hbv1.WorkloadPolicySpec) {
		return func(s *hbv1.WorkloadPolicySpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
		}
	}
	empty := func(s *hbv1.WorkloadPolicySpec) { s.NamespaceSelector = &metav1.LabelSelector{} }

	tests := []struct {
		name   string
		pols   []hbv1.WorkloadPolicy
		labels map[string]string
		want   string
	}{
		{"nil selector matches every namespace", []hbv1.WorkloadPolicy{policy("all", 0, nil)}, nil, "all"},
		{"empty selector matches every namespace", []hbv1.WorkloadPolicy{policy("all", 0, empty)}, nil, "all"},
		{"selector mismatch", []hbv1.WorkloadPolicy{policy("a", 0, sel("team", "a"))}, map[string]string{"team": "b"}, ""},
		{"highest weight wins over a more specific selector", []hbv1.WorkloadPolicy{
			policy("specific", 1, sel("team", "a")), policy("broad", 2, nil),
		}, map[string]string{"team": "a"}, "broad"},
		{"non-matching heavier policy is skipped", []hbv1.WorkloadPolicy{
			policy("heavy", 9, sel("team", "b")), policy("light", 1, sel("team", "a")),
		}, map[string]string{"team": "a"}, "light"},
		{"tie broken by the lexically smallest name", []hbv1.WorkloadPolicy{
			policy("b", 5, nil), policy("a-2", 5, nil), policy("a-10", 5, nil),
		}, nil, "a-10"},
		{"no policies", nil, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustPolicies(t, tc.pols...).Match(tc.labels)
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("Match = %q, want %q", name, tc.want)
			}
		})
	}
}

func TestMatchNamespaceAddsMetadataName(t *testing.T) {
	pols := mustPolicies(t, policy("by-name", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ml"}}
	}))
	if got := pols.MatchNamespace(Namespace{Name: "ml"}); got == nil || got.Name != "by-name" {
		t.Errorf("MatchNamespace(ml) = %v, want by-name", got)
	}
	if got := pols.MatchNamespace(Namespace{Name: "other"}); got != nil {
		t.Errorf("MatchNamespace(other) = %v, want nil", got.Name)
	}
}

func TestNewPoliciesSkipsInvalidSelectors(t *testing.T) {
	bad := policy("bad", 100, func(s *hbv1.WorkloadPolicySpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
	})
	pols, err := NewPolicies([]hbv1.WorkloadPolicy{bad, policy("good", 1, nil)})
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("err = %v, want one naming the bad policy", err)
	}
	if pols.Len() != 1 || pols.Match(nil).Name != "good" {
		t.Errorf("valid policies not kept: len %d", pols.Len())
	}
}

func TestNewPoliciesCopiesInput(t *testing.T) {
	list := []hbv1.WorkloadPolicy{policy("p", 0, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "q" })}
	pols := mustPolicies(t, list...)
	list[0].Spec.Defaults.Queue = "changed"
	if got := pols.Match(nil).Spec.Defaults.Queue; got != "q" {
		t.Errorf("policy shares memory with the input: queue %q", got)
	}
}

func TestNilPolicies(t *testing.T) {
	var pols *Policies
	if pols.Match(nil) != nil || pols.Len() != 0 {
		t.Error("nil *Policies must match nothing")
	}
	p := pod(nil, nil)
	checkResult(t, Pod(p, nsA, nil), wantResult{})
}

// A policy the workloadpolicy controller found naming no PriorityClass (Ready=False,
// PriorityClassNotFound, for its current generation) fills its other defaults but not that class,
// which every Pod would be refused with. A condition of an older generation does not count.
func TestMissingPriorityClassIsNotDefaulted(t *testing.T) {
	pol := hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Generation: 2},
		Spec: hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Queue: "team-a", PriorityClassName: "batch-hgih"}},
		Status: hbv1.WorkloadPolicyStatus{Conditions: []metav1.Condition{{Type: hbv1.PolicyConditionReady, Status: metav1.ConditionFalse,
			Reason: hbv1.PolicyReasonPriorityClassNotFound, ObservedGeneration: 2}}}}
	ns := Namespace{Name: "ml"}
	for _, tc := range []struct {
		name      string
		gen       int64
		wantClass string
	}{{"current generation", 2, ""}, {"older generation", 1, "batch-hgih"}} {
		p := pol.DeepCopy()
		p.Status.Conditions[0].ObservedGeneration = tc.gen
		pols, err := NewPolicies([]hbv1.WorkloadPolicy{*p})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		res := Pod(pod, ns, pols)
		if pod.Spec.PriorityClassName != tc.wantClass || pod.Annotations[QueueNameAnnotation] != "team-a" || res.Policy != "team-a" {
			t.Errorf("%s: priorityClassName %q (want %q), queue %q, policy %q", tc.name, pod.Spec.PriorityClassName, tc.wantClass,
				pod.Annotations[QueueNameAnnotation], res.Policy)
		}
		if p.Spec.Defaults.PriorityClassName != "batch-hgih" {
			t.Fatalf("%s: NewPolicies changed its input", tc.name)
		}
	}
}
