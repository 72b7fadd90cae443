package webhook

import (
	"slices"
	"strings"
	"unicode/utf8"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/jsonpatch"
)

// Warnings are shown by kubectl as "Warning: ..."; the apiserver truncates a response's warnings
// beyond 4096 runes in total, so ours stay well below.
const (
	maxWarningRunes = 1500
	maxValueRunes   = 120
	warningPrefix   = "hyperbatch: "
)

// defaultedWarning is e.g. "hyperbatch: defaulted spec.queue=team-a, spec.priorityClassName=batch-normal
// from WorkloadPolicy team-a". Fields are grouped by source in the order they were filled.
func defaultedWarning(fills []defaults.Fill, obj jsonpatch.Doc, note string) string {
	type group struct {
		source string
		items  []string
	}
	var groups []group
	for _, f := range fills {
		src := f.Describe()
		i := slices.IndexFunc(groups, func(g group) bool { return g.source == src })
		if i < 0 {
			groups = append(groups, group{source: src})
			i = len(groups) - 1
		}
		groups[i].items = append(groups[i].items, f.Path+"="+valueAt(obj, f.Path))
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

func valueAt(obj jsonpatch.Doc, path string) string {
	s, ok := obj.Value(path)
	if !ok {
		return "?"
	}
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

// skippedWarnings are one warning per default the engine left out because it would contradict the
// workload, e.g. "hyperbatch: spec.placement.spreadConstraints (maxClusters 1 from WorkloadPolicy
// p) was not defaulted: it would contradict ...".
func skippedWarnings(skips []defaults.Skip) []string {
	if len(skips) == 0 {
		return nil
	}
	out := make([]string, len(skips))
	for i, s := range skips {
		out[i] = clip(warningPrefix + s.String())
	}
	return out
}
