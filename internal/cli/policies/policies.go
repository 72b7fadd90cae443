// Package policies is `kubectl hyperbatch policies`: every WorkloadPolicy, the namespaces it
// governs, the namespaces two policies of equal weight match (the engine breaks the tie by name,
// which is rarely what was meant), and the policies whose conditions are not True. Which policy
// governs a namespace is the defaulting engine's own answer (defaults.Policies.MatchNamespace).
package policies

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Kind is the report's kind in its JSON and YAML forms.
const Kind = "PolicyReport"

// Report is the command's result.
type Report struct {
	metav1.TypeMeta `json:",inline"`
	Policies        []Policy   `json:"policies"`
	Conflicts       []Conflict `json:"conflicts"`
	NotReady        []NotReady `json:"notReady"`
}

// Policy is one WorkloadPolicy.
type Policy struct {
	Name   string `json:"name"`
	Weight int32  `json:"weight"`
	// Selector is spec.namespaceSelector as kubectl writes selectors ("<all>" for none).
	Selector string `json:"selector"`
	// Ready is the Ready condition's status ("Unknown" before the controller wrote one).
	Ready string `json:"ready"`
	Queue string `json:"queue,omitempty"`
	// Governs are the namespaces this policy governs: it is the one the engine picks for them.
	Governs []string `json:"governs"`
	// Outranked are the namespaces it matches but another policy governs.
	Outranked []string `json:"outranked,omitempty"`
}

// Conflict is a namespace matched by more than one policy of the governing policy's weight.
type Conflict struct {
	Namespace string `json:"namespace"`
	Weight    int32  `json:"weight"`
	// Governing is the policy the engine picks (the lexically smallest name); Tied the others.
	Governing string   `json:"governing"`
	Tied      []string `json:"tied"`
}

// NotReady is one condition of a policy that is not True, or a status the controller has not
// written for the policy's current generation.
type NotReady struct {
	Policy    string `json:"policy"`
	Condition string `json:"condition"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// DeepCopyObject implements runtime.Object.
func (r *Report) DeepCopyObject() runtime.Object { return output.DeepCopy(r) }

// NeedsAttention reports whether a script should look: a conflict or a policy not Ready.
func (r *Report) NeedsAttention() bool { return len(r.Conflicts) > 0 || len(r.NotReady) > 0 }

// Build computes the report from a snapshot of WorkloadPolicies and Namespaces.
func Build(s *snapshot.Snapshot) *Report {
	r := &Report{TypeMeta: output.Meta(Kind), Policies: []Policy{}, Conflicts: []Conflict{}, NotReady: []NotReady{}}
	pols, _ := defaults.NewPolicies(s.Policies) // invalid selectors are reported from the conditions below
	byName := map[string]*Policy{}
	sorted := slices.Clone(s.Policies)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	sels := map[string]labels.Selector{}
	for i := range sorted {
		p := &sorted[i]
		pol := Policy{Name: p.Name, Weight: p.Spec.Weight, Selector: selectorString(p.Spec.NamespaceSelector),
			Ready: "Unknown", Queue: p.Spec.Defaults.Queue, Governs: []string{}}
		if c := apimeta.FindStatusCondition(p.Status.Conditions, "Ready"); c != nil {
			pol.Ready = string(c.Status)
		}
		if sel, err := defaults.NamespaceSelector(p); err == nil {
			sels[p.Name] = sel
		}
		r.Policies = append(r.Policies, pol)
		r.NotReady = append(r.NotReady, notReady(p)...)
	}
	for i := range r.Policies {
		byName[r.Policies[i].Name] = &r.Policies[i]
	}
	nss := slices.Clone(s.Namespaces)
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	for i := range nss {
		ns := defaults.NamespaceOf(&nss[i])
		gov := pols.MatchNamespace(ns)
		if gov == nil {
			continue
		}
		set := namespaceLabels(&nss[i])
		var tied []string
		for j := range sorted {
			p := &sorted[j]
			sel, ok := sels[p.Name]
			if !ok || p.Name == gov.Name || !sel.Matches(set) {
				continue
			}
			byName[p.Name].Outranked = append(byName[p.Name].Outranked, ns.Name)
			if p.Spec.Weight == gov.Spec.Weight {
				tied = append(tied, p.Name)
			}
		}
		byName[gov.Name].Governs = append(byName[gov.Name].Governs, ns.Name)
		if len(tied) > 0 {
			r.Conflicts = append(r.Conflicts, Conflict{Namespace: ns.Name, Weight: gov.Spec.Weight, Governing: gov.Name, Tied: tied})
		}
	}
	return r
}

// namespaceLabels are a namespace's labels with kubernetes.io/metadata.name, as the engine sees them.
func namespaceLabels(ns *corev1.Namespace) labels.Set {
	set := labels.Set{corev1.LabelMetadataName: ns.Name}
	for k, v := range ns.Labels {
		set[k] = v
	}
	return set
}

func selectorString(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "<all>"
	}
	s := metav1.FormatLabelSelector(sel)
	if s == "" {
		return "<all>"
	}
	return s
}

func notReady(p *hbv1.WorkloadPolicy) []NotReady {
	var out []NotReady
	if p.Status.ObservedGeneration < p.Generation {
		out = append(out, NotReady{Policy: p.Name, Condition: "Ready", Status: "Unknown", Reason: "NotObserved",
			Message: fmt.Sprintf("the workloadpolicy controller has not written the status of generation %d yet (observed %d); is hyperbatch-manager running?", p.Generation, p.Status.ObservedGeneration)})
		return out
	}
	for _, c := range p.Status.Conditions {
		if problem(c) {
			out = append(out, NotReady{Policy: p.Name, Condition: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		}
	}
	return out
}

// problem says whether a condition needs attention. WeightTie is True while another policy of the
// same weight wins some of this policy's namespaces, so its True is the problem; every other condition
// of a policy needs attention while it is not True.
func problem(c metav1.Condition) bool {
	if c.Type == hbv1.PolicyConditionWeightTie {
		return c.Status == metav1.ConditionTrue
	}
	return c.Status != metav1.ConditionTrue
}

// WriteTable writes the policies, then the conflicts and the conditions that need attention.
func (r *Report) WriteTable(w io.Writer) error {
	pw := output.Sticky(w)
	rows := [][]string{{"NAME", "WEIGHT", "READY", "QUEUE", "SELECTOR", "GOVERNS", "OUTRANKED IN"}}
	for _, p := range r.Policies {
		rows = append(rows, []string{p.Name, strconv.Itoa(int(p.Weight)), p.Ready, p.Queue, p.Selector, output.List(p.Governs), output.List(p.Outranked)})
	}
	if len(r.Policies) == 0 {
		pw.Println("No WorkloadPolicies: hyperbatch defaults nothing and its workload webhooks skip every namespace.")
		return pw.Err
	}
	if err := output.Tab(w, rows); err != nil {
		return err
	}
	if len(r.Conflicts) > 0 {
		pw.Println("\nConflicts: namespaces matched by policies of equal weight (the engine picks the smallest name; give one a higher weight):")
		rows = [][]string{{"NAMESPACE", "WEIGHT", "GOVERNED BY", "TIED WITH"}}
		for _, c := range r.Conflicts {
			rows = append(rows, []string{c.Namespace, strconv.Itoa(int(c.Weight)), c.Governing, output.List(c.Tied)})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if len(r.NotReady) > 0 {
		pw.Println("\nConditions that need attention (Ready or QueuesExist not True, WeightTie True):")
		rows = [][]string{{"POLICY", "CONDITION", "STATUS", "REASON", "MESSAGE"}}
		for _, n := range r.NotReady {
			rows = append(rows, []string{n.Policy, n.Condition, n.Status, n.Reason, n.Message})
		}
		return output.Tab(w, rows)
	}
	return nil
}
