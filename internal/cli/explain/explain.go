// Package explain is `kubectl hyperbatch explain <kind>/<name>`: which WorkloadPolicy governs the
// object's namespace and why, which fields hyperbatch filled and from where (the defaulted-by
// annotation, read with the engine's own parser), what the engine skips on this object and why
// (its coherence rules, run again on a copy), what hyperbatch refused or warned about (its Events),
// and for a HyperJob the split into children. Every answer comes from the engine (internal/defaults)
// or from what the controllers stored; nothing here re-decides.
package explain

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// Kind is the report's kind in its JSON and YAML forms.
const Kind = "ExplainReport"

// GPUResource is the accelerator a child's demand counts besides CPU.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Report is the command's result.
type Report struct {
	metav1.TypeMeta `json:",inline"`
	Object          Ref `json:"object"`
	// Policy is the governing WorkloadPolicy, "" when none governs the namespace.
	Policy string `json:"policy"`
	// Candidates are every policy matching the namespace, the governing one first, each with why it
	// won or lost.
	Candidates []Candidate `json:"candidates"`
	// Filled are the fields hyperbatch filled, from the object's defaulted-by annotation.
	Filled []Filled `json:"filled"`
	// Skipped are the defaults the engine leaves out on this object, and why.
	Skipped []Skipped `json:"skipped"`
	// WouldFill are fields the engine would fill on this object today but did not at admission (a
	// policy created or changed since; UPDATE introduces nothing).
	WouldFill []Filled `json:"wouldFill,omitempty"`
	// Warnings are the Warning Events about the object: refusals and failures hyperbatch (and its
	// scheduler) reported.
	Warnings []Event `json:"warnings"`
	// Split is a HyperJob's children.
	Split []Child `json:"split,omitempty"`
}

// Ref names the object.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Candidate is one policy matching the namespace.
type Candidate struct {
	Name     string `json:"name"`
	Weight   int32  `json:"weight"`
	Selector string `json:"selector"`
	Outcome  string `json:"outcome"`
}

// Filled is one filled field and its source.
type Filled struct {
	Field  string `json:"field"`
	Path   string `json:"path,omitempty"`
	Source string `json:"source"`
	// From is the source in words (defaults.DescribeSource).
	From string `json:"from"`
}

// Skipped is one default left out.
type Skipped struct {
	Path     string `json:"path"`
	Default  string `json:"default"`
	From     string `json:"from"`
	Conflict string `json:"conflict"`
}

// Event is one Warning Event.
type Event struct {
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// Child is one child of a HyperJob: its Volcano Job, what it asks for, and where it goes.
type Child struct {
	Name          string `json:"name"`
	ReplicatedJob string `json:"replicatedJob"`
	Pods          int32  `json:"pods"`
	MinAvailable  int32  `json:"minAvailable"`
	CPU           string `json:"cpu"`
	GPU           int64  `json:"gpu"`
	Queue         string `json:"queue"`
	// Clusters are the member clusters its PropagationPolicy allows.
	Clusters []string `json:"clusters"`
	State    string   `json:"state"`
}

// DeepCopyObject implements runtime.Object.
func (r *Report) DeepCopyObject() runtime.Object { return output.DeepCopy(r) }

// LookupKind resolves what a user types for a kind (pod, vcjob, jobs.batch.volcano.sh, PodGroup,
// pg, jobset, hyperjob, pp ...: the registry's workload.Names) to its row of the engine's kind
// table; only the kinds whose registry row says CLI.Explain are explained.
func LookupKind(name string) (defaults.KindSpec, error) {
	n := strings.ToLower(name)
	var valid, short []string
	for _, w := range workload.All() {
		if w.CLI.Explain {
			valid = append(valid, string(w.Kind))
			short = append(short, w.CLI.Name)
		}
	}
	if w, ok := workload.ByName(n); ok && w.CLI.Explain {
		if spec, ok := defaults.LookupKind(w.Kind); ok {
			return spec, nil
		}
	}
	hint := ""
	if n == "job" || n == "jobs" {
		hint = " (a Volcano Job is vcjob; Kubernetes Jobs are not admitted by hyperbatch)"
	}
	return defaults.KindSpec{}, exitcode.Usagef("kind %q is not one hyperbatch explains%s; use one of %s (or %s)",
		name, hint, strings.Join(valid, ", "), strings.Join(short, ", "))
}

// Build explains obj (of kind spec) from the snapshot: Policies, Namespaces, Events and, for a
// HyperJob, VolcanoJobs and PropagationPolicies of its namespace.
func Build(spec defaults.KindSpec, obj defaults.Object, s *snapshot.Snapshot) *Report {
	r := &Report{TypeMeta: output.Meta(Kind), Object: Ref{Kind: string(spec.Kind), Namespace: obj.GetNamespace(), Name: obj.GetName()},
		Candidates: []Candidate{}, Filled: []Filled{}, Skipped: []Skipped{}, Warnings: []Event{}}
	pols, _ := defaults.NewPolicies(s.Policies)
	ns := defaults.Namespace{Name: obj.GetNamespace()}
	if n := s.Namespace(obj.GetNamespace()); n != nil {
		ns = defaults.NamespaceOf(n)
	}
	gov := pols.MatchNamespace(ns)
	if gov != nil {
		r.Policy = gov.Name
	}
	r.Candidates = candidates(s.Policies, ns, gov)

	for _, e := range defaults.ParseDefaultedBy(obj.GetAnnotations()[hbv1.DefaultedByAnnotation]) {
		for _, f := range e.Fields {
			r.Filled = append(r.Filled, Filled{Field: f, Source: e.Source.String(), From: defaults.DescribeSource(e.Source, f)})
		}
	}
	// The engine on a copy: its skips are this object's, and what it would fill now is what changed.
	if spec.Default != nil {
		cp, ok := obj.DeepCopyObject().(defaults.Object)
		if ok {
			res := spec.Default(cp, ns, pols)
			for _, sk := range res.Skips {
				r.Skipped = append(r.Skipped, Skipped{Path: sk.Path, Default: sk.Default, From: defaults.DescribeSource(sk.Source, sk.Field), Conflict: sk.Conflict})
			}
			for _, f := range res.Fills {
				r.WouldFill = append(r.WouldFill, Filled{Field: f.Field, Path: f.Path, Source: f.Source.String(), From: f.Describe()})
			}
		}
	}
	for _, e := range s.EventsOf(string(obj.GetUID())) {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		src := e.ReportingController
		if src == "" {
			src = e.Source.Component
		}
		r.Warnings = append(r.Warnings, Event{Source: src, Reason: e.Reason, Message: e.Message, Count: max(e.Count, 1)})
	}
	if spec.Kind == defaults.KindHyperJob {
		r.Split = split(obj.GetNamespace(), obj.GetName(), s)
	}
	return r
}

// candidates lists the policies matching ns in the engine's order (highest weight, then name).
func candidates(list []hbv1.WorkloadPolicy, ns defaults.Namespace, gov *hbv1.WorkloadPolicy) []Candidate {
	set := map[string]string{corev1.LabelMetadataName: ns.Name}
	for k, v := range ns.Labels {
		set[k] = v
	}
	var out []Candidate
	for i := range list {
		p := &list[i]
		sel, err := defaults.NamespaceSelector(p)
		if err != nil {
			continue
		}
		one, _ := defaults.NewPolicies([]hbv1.WorkloadPolicy{*p})
		if one.Match(set) == nil {
			continue
		}
		c := Candidate{Name: p.Name, Weight: p.Spec.Weight, Selector: sel.String()}
		if c.Selector == "" {
			c.Selector = "<all>"
		}
		switch {
		case gov != nil && gov.Name == p.Name:
			c.Outcome = "governs"
		case gov != nil && gov.Spec.Weight > p.Spec.Weight:
			c.Outcome = fmt.Sprintf("outranked: weight %d < %d of %s", p.Spec.Weight, gov.Spec.Weight, gov.Name)
		case gov != nil:
			c.Outcome = fmt.Sprintf("tie lost: same weight %d as %s, which sorts first by name (give one a higher weight)", p.Spec.Weight, gov.Name)
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Outcome == "governs") != (out[j].Outcome == "governs") {
			return out[i].Outcome == "governs"
		}
		if out[i].Weight != out[j].Weight {
			return out[i].Weight > out[j].Weight
		}
		return out[i].Name < out[j].Name
	})
	if out == nil {
		out = []Candidate{}
	}
	return out
}

// split lists a HyperJob's child Volcano Jobs (label volcano.sh/hyperjob-name) with their demand
// and the clusters their PropagationPolicy (same name) allows.
func split(namespace, name string, s *snapshot.Snapshot) []Child {
	clusters := map[string][]string{}
	for _, pp := range s.PropagationPolicies {
		if pp.Namespace == namespace && pp.Labels[hbv1.HyperJobNameLabel] == name && pp.Spec.Placement.ClusterAffinity != nil {
			clusters[pp.Name] = pp.Spec.Placement.ClusterAffinity.ClusterNames
		}
	}
	out := []Child{}
	for i := range s.VolcanoJobs {
		j := &s.VolcanoJobs[i]
		if j.Namespace != namespace || j.Labels[hbv1.HyperJobNameLabel] != name {
			continue
		}
		c := Child{Name: j.Name, ReplicatedJob: j.Labels[hbv1.ReplicatedJobNameLabel], MinAvailable: j.Spec.MinAvailable,
			Queue: j.Spec.Queue, Clusters: clusters[j.Name], State: string(j.Status.State.Phase)}
		cpu, gpu := demand(j)
		c.CPU, c.GPU = cpu.String(), gpu
		for _, t := range j.Spec.Tasks {
			c.Pods += t.Replicas
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// demand sums a Volcano Job's container requests over its tasks' replicas.
func demand(j *batchv1alpha1.Job) (cpu resource.Quantity, gpu int64) {
	for _, t := range j.Spec.Tasks {
		for _, ctr := range t.Template.Spec.Containers {
			q := ctr.Resources.Requests[corev1.ResourceCPU]
			for range t.Replicas {
				cpu.Add(q)
			}
			g := ctr.Resources.Requests[GPUResource]
			if g.IsZero() {
				g = ctr.Resources.Limits[GPUResource]
			}
			gpu += g.Value() * int64(t.Replicas)
		}
	}
	return cpu, gpu
}

// WriteTable writes the report in sections.
func (r *Report) WriteTable(w io.Writer) error {
	pw := output.Sticky(w)
	pw.Printf("%s %s/%s\n\n", r.Object.Kind, r.Object.Namespace, r.Object.Name)
	if r.Policy == "" {
		pw.Printf("Governing WorkloadPolicy: none matches namespace %s (nothing is defaulted here; the workload webhooks skip it).\n", r.Object.Namespace)
	} else {
		pw.Printf("Governing WorkloadPolicy: %s\n", r.Policy)
	}
	if len(r.Candidates) > 0 {
		rows := [][]string{{"POLICY", "WEIGHT", "SELECTOR", "OUTCOME"}}
		for _, c := range r.Candidates {
			rows = append(rows, []string{c.Name, strconv.Itoa(int(c.Weight)), c.Selector, c.Outcome})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	pw.Printf("\nFilled by hyperbatch (%s):\n", hbv1.DefaultedByAnnotation)
	if len(r.Filled) == 0 {
		pw.Println("  nothing")
	} else if err := filledTable(w, r.Filled); err != nil {
		return err
	}
	pw.Println("\nSkipped (a default that would contradict the workload):")
	if len(r.Skipped) == 0 {
		pw.Println("  nothing")
	} else {
		rows := [][]string{{"FIELD", "DEFAULT", "FROM", "CONFLICTS WITH"}}
		for _, sk := range r.Skipped {
			rows = append(rows, []string{sk.Path, sk.Default, sk.From, sk.Conflict})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if len(r.WouldFill) > 0 {
		pw.Println("\nWould be filled if created now (the policies changed since; an update never adds defaults):")
		if err := filledTable(w, r.WouldFill); err != nil {
			return err
		}
	}
	pw.Println("\nRefused or warned (Warning Events):")
	if len(r.Warnings) == 0 {
		pw.Println("  nothing")
	} else {
		rows := [][]string{{"SOURCE", "REASON", "COUNT", "MESSAGE"}}
		for _, e := range r.Warnings {
			rows = append(rows, []string{e.Source, e.Reason, strconv.Itoa(int(e.Count)), e.Message})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if r.Object.Kind == string(defaults.KindHyperJob) {
		pw.Printf("\nSplit: %d children\n", len(r.Split))
		rows := [][]string{{"CHILD", "REPLICATEDJOB", "PODS", "MINAVAILABLE", "CPU", "GPU", "QUEUE", "CLUSTERS", "STATE"}}
		for _, c := range r.Split {
			rows = append(rows, []string{c.Name, c.ReplicatedJob, strconv.Itoa(int(c.Pods)), strconv.Itoa(int(c.MinAvailable)), c.CPU,
				strconv.FormatInt(c.GPU, 10), c.Queue, output.List(c.Clusters), c.State})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	return nil
}

func filledTable(w io.Writer, fs []Filled) error {
	rows := [][]string{{"FIELD", "SOURCE", "FROM"}}
	for _, f := range fs {
		name := f.Field
		if f.Path != "" {
			name = f.Path
		}
		rows = append(rows, []string{name, f.Source, f.From})
	}
	return output.Tab(w, rows)
}
