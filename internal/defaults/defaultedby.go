package defaults

import (
	"fmt"
	"strings"
)

// DefaultedByEntry is one source of a hyperbatch.dev/defaulted-by value and the short field names
// (FieldQueue ...) it filled, in the canonical order.
type DefaultedByEntry struct {
	Source Source
	Fields []string
}

// ParseDefaultedBy reads a hyperbatch.dev/defaulted-by value ("<source>/<f>,<f>;<source>/<f>", see
// the package doc) into its entries, sources in the order written. It never fails: an entry without
// "/" is a source with no fields; blank entries and blank field names are dropped. Tools that explain
// an object's defaults (a kubectl plugin) read the annotation with it rather than parsing it again.
func ParseDefaultedBy(v string) []DefaultedByEntry {
	p := parseDefaultedBy(v)
	out := make([]DefaultedByEntry, 0, len(p.entries))
	for _, e := range p.entries {
		if e.source == "" && len(e.fields) == 0 {
			continue
		}
		out = append(out, DefaultedByEntry{Source: ParseSource(e.source), Fields: sortedFields(e.fields)})
	}
	return out
}

// FormatDefaultedBy writes entries in the annotation's canonical form (ParseDefaultedBy's inverse).
func FormatDefaultedBy(entries []DefaultedByEntry) string {
	var p provenance
	for _, e := range entries {
		p.add(e.Source.String(), "")
		for _, f := range e.Fields {
			p.add(e.Source.String(), f)
		}
	}
	return p.String()
}

// ParseSource reads a source as the defaulted-by annotation writes it (Source.String):
// "namespace:<namespace>", "jobset:<name>", "vcjob:<name>", or a WorkloadPolicy's name.
func ParseSource(s string) Source {
	for _, k := range []struct {
		prefix string
		kind   SourceKind
	}{{namespaceSourcePrefix, SourceNamespace}, {jobSetSourcePrefix, SourceJobSet}, {volcanoJobSourcePrefix, SourceVolcanoJob}} {
		if name, ok := strings.CutPrefix(s, k.prefix); ok {
			return Source{Kind: k.kind, Name: name}
		}
	}
	return Source{Kind: SourcePolicy, Name: s}
}

// DescribeSource is where a filled field's value came from, in words, as hyperbatch's warnings say
// it: "WorkloadPolicy team-a", "namespace ml (annotation scheduling.volcano.sh/queue-name)", "JobSet
// train (its scheduling.volcano.sh/queue-name annotation)", "Volcano Job train (its spec: the
// PodGroup follows its Job)". field is the fill's short name (FieldQueue ...).
func DescribeSource(s Source, field string) string {
	switch {
	case s.Kind == SourceNamespace:
		return fmt.Sprintf("namespace %s (annotation %s)", s.Name, QueueNameAnnotation)
	case s.Kind == SourceJobSet && field == FieldMinResources:
		return fmt.Sprintf("JobSet %s (its pods' requests as admitted: LimitRange defaults and RuntimeClass overhead)", s.Name)
	case s.Kind == SourceJobSet && field == FieldGroupName:
		return fmt.Sprintf("JobSet %s (its name: the JobSet's PodGroup)", s.Name)
	case s.Kind == SourceJobSet:
		return fmt.Sprintf("JobSet %s (its %s annotation)", s.Name, QueueNameAnnotation)
	case s.Kind == SourceVolcanoJob:
		return fmt.Sprintf("Volcano Job %s (its spec: the PodGroup follows its Job)", s.Name)
	case s.Name == "":
		return "hyperbatch"
	}
	return "WorkloadPolicy " + s.Name
}

// Describe is DescribeSource of the fill's source and field.
func (f Fill) Describe() string { return DescribeSource(f.Source, f.Field) }
