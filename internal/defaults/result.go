package defaults

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Result reports what one call of a kind function did.
type Result struct {
	// Policy is the name of the WorkloadPolicy governing the namespace, "" when none matches.
	Policy string
	// Fills are the fields this call filled, in the order filled. Empty when nothing changed.
	Fills []Fill
	// DefaultedBy is the hyperbatch.dev/defaulted-by value this call wrote (history merged in),
	// "" when this call filled nothing.
	DefaultedBy string
	// Skips are the defaults this call left out because they would contradict what the workload
	// says (coherence.go). The webhook warns about each; nothing is written for them.
	Skips []Skip
}

// Skip is one default left out: which, from where, and the workload's own value it would contradict.
type Skip struct {
	// Path is the field the default would have filled, e.g. "spec.placement.spreadConstraints".
	Path string
	// Field is the default's short name (FieldSpreadConstraints ...).
	Field string
	// Default describes the default's value, e.g. "maxClusters 1".
	Default string
	// Source is where the default came from.
	Source Source
	// Conflict names the workload's own field and value the default would contradict.
	Conflict string
}

// Fill is one field one call filled: where, which default, and where the value came from.
type Fill struct {
	// Path is the field's path in the object, e.g. "spec.queue" or
	// "metadata.annotations[scheduling.volcano.sh/queue-name]".
	Path string
	// Field is the default's short name as defaulted-by writes it (FieldQueue ...).
	Field string
	// Source is where the value came from.
	Source Source
}

// SourceKind says what kind of thing a default's value came from.
type SourceKind string

const (
	// SourcePolicy is the governing WorkloadPolicy's spec.defaults (Source.Name is the policy).
	SourcePolicy SourceKind = "WorkloadPolicy"
	// SourceNamespace is the namespace's scheduling.volcano.sh/queue-name annotation (Source.Name
	// is the namespace).
	SourceNamespace SourceKind = "Namespace"
	// SourceJobSet is a JobSet's own queue annotation copied into its pod templates (Source.Name is
	// the JobSet).
	SourceJobSet SourceKind = "JobSet"
	// SourceVolcanoJob is the Volcano Job a PodGroup belongs to: its PodGroup follows its queue,
	// priorityClassName and networkTopology (Source.Name is the Job).
	SourceVolcanoJob SourceKind = "VolcanoJob"
)

// Source is where a filled value came from.
type Source struct {
	Kind SourceKind
	Name string
}

// String is the source as the defaulted-by annotation writes it: a policy's name,
// "namespace:<namespace>", "jobset:<name>" or "vcjob:<name>".
func (s Source) String() string {
	switch s.Kind {
	case SourceNamespace:
		return namespaceSourcePrefix + s.Name
	case SourceJobSet:
		return jobSetSourcePrefix + s.Name
	case SourceVolcanoJob:
		return volcanoJobSourcePrefix + s.Name
	}
	return s.Name
}

// Changed reports whether the call modified the object.
func (r Result) Changed() bool { return len(r.Fills) > 0 }

// Paths are the paths of the filled fields, in the order filled.
func (r Result) Paths() []string {
	out := make([]string, len(r.Fills))
	for i, f := range r.Fills {
		out[i] = f.Path
	}
	return out
}

// Filled reports whether the call filled the field at path.
func (r Result) Filled(path string) bool {
	return slices.ContainsFunc(r.Fills, func(f Fill) bool { return f.Path == path })
}

// run is the state of one kind-function call: the governing policy and what was filled from where.
type run struct {
	ns     Namespace
	policy *hbv1.WorkloadPolicy
	res    Result
	prov   provenance
	// explicitQueue: the user wrote the object's spec.queue (even Volcano's "default"), so it is kept.
	explicitQueue bool
}

func begin(ns Namespace, pols *Policies) *run {
	r := &run{ns: ns, policy: pols.MatchNamespace(ns)}
	if r.policy != nil {
		r.res.Policy = r.policy.Name
	}
	return r
}

// defaults are the governing policy's defaults, zero when no policy governs.
func (r *run) defaults() hbv1.PolicyDefaults {
	if r.policy == nil {
		return hbv1.PolicyDefaults{}
	}
	return r.policy.Spec.Defaults
}

// policySource is the source of values taken from the governing policy.
func (r *run) policySource() Source {
	if r.policy == nil {
		return Source{Kind: SourcePolicy}
	}
	return Source{Kind: SourcePolicy, Name: r.policy.Name}
}

// record notes that path was filled with the value of short field name from source.
func (r *run) record(path, field string, source Source) {
	if r.res.Fills == nil {
		r.res.Fills = make([]Fill, 0, 6) // a call fills a handful
	}
	r.res.Fills = append(r.res.Fills, Fill{Path: path, Field: field, Source: source})
	r.prov.add(source.String(), field)
}

// fillString sets *dst to val when *dst is "" and val is not, recording it as a policy default.
func (r *run) fillString(dst *string, val, path, field string) {
	if *dst == "" && val != "" {
		*dst = val
		r.record(path, field, r.policySource())
	}
}

// fillAnnotation sets meta's annotation key to val when it is absent or blank and val is not "".
func (r *run) fillAnnotation(meta *metav1.ObjectMeta, key, val, field string, source Source) {
	if val == "" || strings.TrimSpace(meta.Annotations[key]) != "" || meta.Annotations[key] == val {
		return
	}
	setAnnotation(meta, key, val)
	r.record("metadata.annotations["+key+"]", field, source)
}

// finish stamps the defaulted-by annotation on meta when anything was filled and returns the Result.
func (r *run) finish(meta *metav1.ObjectMeta) Result {
	if len(r.res.Fills) == 0 {
		return r.res
	}
	merged := parseDefaultedBy(meta.Annotations[hbv1.DefaultedByAnnotation])
	merged.merge(r.prov)
	r.res.DefaultedBy = merged.String()
	setAnnotation(meta, hbv1.DefaultedByAnnotation, r.res.DefaultedBy)
	return r.res
}

func setAnnotation(meta *metav1.ObjectMeta, key, val string) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = val
}

// provenance is the parsed form of a defaulted-by value: sources in first-seen order, each with
// its field names (a set, kept as a short list: a value names a handful).
type provenance struct {
	entries []provenanceEntry
}

type provenanceEntry struct {
	source string
	fields []string
}

func (p *provenance) add(source, field string) {
	i := slices.IndexFunc(p.entries, func(e provenanceEntry) bool { return e.source == source })
	if i < 0 {
		p.entries = append(p.entries, provenanceEntry{source: source})
		i = len(p.entries) - 1
	}
	if field != "" && !slices.Contains(p.entries[i].fields, field) {
		p.entries[i].fields = append(p.entries[i].fields, field)
	}
}

func (p *provenance) merge(o provenance) {
	for _, e := range o.entries {
		p.add(e.source, "")
		for _, f := range e.fields {
			p.add(e.source, f)
		}
	}
}

// parseDefaultedBy reads "<source>/<f>,<f>;<source>/<f>". It never fails: an entry without "/" is
// a source with no fields, blank entries and blank field names are dropped.
func parseDefaultedBy(v string) provenance {
	var p provenance
	for _, entry := range strings.Split(v, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		source, list, _ := strings.Cut(entry, "/")
		source = strings.TrimSpace(source)
		p.add(source, "")
		for _, f := range strings.Split(list, ",") {
			if f = strings.TrimSpace(f); f != "" {
				p.add(source, f)
			}
		}
	}
	return p
}

// String writes the canonical form: sources in first-seen order, fields in fieldOrder, unknown
// field names after the known ones in byte order.
func (p provenance) String() string {
	var b strings.Builder
	for _, e := range p.entries {
		if len(e.fields) == 0 && e.source == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(e.source)
		if len(e.fields) == 0 {
			continue
		}
		fs := sortedFields(e.fields)
		b.WriteByte('/')
		for i, f := range fs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f)
		}
	}
	return b.String()
}

func fieldRank(f string) int {
	for i, known := range fieldOrder {
		if f == known {
			return i
		}
	}
	return len(fieldOrder)
}

// sortedFields is fields in fieldOrder, unknown names after the known ones in byte order.
func sortedFields(fields []string) []string {
	fs := slices.Clone(fields)
	slices.SortFunc(fs, func(x, y string) int {
		if rx, ry := fieldRank(x), fieldRank(y); rx != ry {
			return rx - ry
		}
		return strings.Compare(x, y)
	})
	return fs
}
