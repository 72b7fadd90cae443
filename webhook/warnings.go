package webhook

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Warnings are shown by kubectl as "Warning: ..."; the apiserver truncates a response's warnings
// beyond 4096 runes in total, so ours stay well below.
const (
	maxWarningRunes = 1500
	maxValueRunes   = 120
	warningPrefix   = "hyperbatch: "
)

// fieldSource is a short field name of a defaulted-by value and the source it was filled from.
type fieldSource struct{ field, source string }

// parseSources reads a defaulted-by value into short field name -> source (a later entry wins).
// The engine fills each field from one source per call, so the list is exact for a value that
// holds one call's account.
func parseSources(defaultedBy string) []fieldSource {
	var out []fieldSource
	for entry := range strings.SplitSeq(defaultedBy, ";") {
		source, fields, ok := strings.Cut(strings.TrimSpace(entry), "/")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			if i := slices.IndexFunc(out, func(fs fieldSource) bool { return fs.field == f }); i >= 0 {
				out[i].source = source
			} else {
				out = append(out, fieldSource{field: f, source: source})
			}
		}
	}
	return out
}

// sourceOf is field's source in sources, "" when it has none.
func sourceOf(sources []fieldSource, field string) string {
	for _, fs := range sources {
		if fs.field == field {
			return fs.source
		}
	}
	return ""
}

// shortField maps a path the engine reports to the short field name defaulted-by uses.
func shortField(path string) string {
	switch {
	case strings.HasSuffix(path, "["+defaults.QueueNameAnnotation+"]"), strings.HasSuffix(path, ".queue"):
		return defaults.FieldQueue
	case strings.HasSuffix(path, ".priorityClassName"):
		return defaults.FieldPriorityClassName
	case strings.HasSuffix(path, ".schedulerName"):
		return defaults.FieldSchedulerName
	case strings.Contains(path, "networkTopology"), strings.Contains(path, "network-topology"):
		return defaults.FieldNetworkTopology
	case strings.HasSuffix(path, "ttlSecondsAfterFinished"), strings.Contains(path, hbv1.TTLSecondsAfterFinishedAnnotation):
		return defaults.FieldTTLSecondsAfterFinished
	case strings.Contains(path, hbv1.ActiveDeadlineSecondsAnnotation):
		return defaults.FieldActiveDeadlineSeconds
	case strings.HasSuffix(path, ".clusterNames"):
		return defaults.FieldClusterNames
	case strings.Contains(path, ".replicaScheduling"):
		return defaults.FieldReplicaScheduling
	case strings.HasSuffix(path, ".spreadConstraints"):
		return defaults.FieldSpreadConstraints
	case strings.HasSuffix(path, ".propagateDeps"):
		return defaults.FieldPropagateDeps
	}
	return ""
}

// describeSource turns a defaulted-by source into words.
func describeSource(source string) string {
	switch {
	case strings.HasPrefix(source, "namespace:"):
		return fmt.Sprintf("namespace %s (annotation %s)", strings.TrimPrefix(source, "namespace:"), defaults.QueueNameAnnotation)
	case strings.HasPrefix(source, "jobset:"):
		return fmt.Sprintf("JobSet %s (its %s annotation)", strings.TrimPrefix(source, "jobset:"), defaults.QueueNameAnnotation)
	case source == "":
		return "hyperbatch"
	}
	return "WorkloadPolicy " + source
}

// defaultedWarning is e.g. "hyperbatch: defaulted spec.queue=team-a, spec.priorityClassName=batch-normal
// from WorkloadPolicy team-a". Fields are grouped by source in the order they were filled.
func defaultedWarning(fields []string, obj map[string]any, sources []fieldSource, note string) string {
	type group struct {
		source string
		items  []string
	}
	var groups []group
	for _, p := range fields {
		src := describeSource(sourceOf(sources, shortField(p)))
		i := slices.IndexFunc(groups, func(g group) bool { return g.source == src })
		if i < 0 {
			groups = append(groups, group{source: src})
			i = len(groups) - 1
		}
		groups[i].items = append(groups[i].items, p+"="+valueAt(obj, p))
	}
	var b strings.Builder
	b.Grow(256)
	b.WriteString(warningPrefix + "defaulted ")
	for i, g := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		for j, item := range g.items {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(item)
		}
		b.WriteString(" from " + g.source)
	}
	if note != "" {
		if len(groups) > 0 {
			b.WriteString("; ")
		}
		b.WriteString(note)
	}
	return clip(b.String())
}

func valueAt(obj map[string]any, path string) string {
	steps, err := parsePath(path)
	if err != nil {
		return "?"
	}
	v, ok := lookup(obj, steps)
	if !ok {
		return "?"
	}
	s := renderValue(v)
	if utf8.RuneCountInString(s) > maxValueRunes {
		s = string([]rune(s)[:maxValueRunes]) + "…"
	}
	return s
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxWarningRunes {
		return s
	}
	return string([]rune(s)[:maxWarningRunes]) + "… (see the " + hbv1.DefaultedByAnnotation + " annotation)"
}
