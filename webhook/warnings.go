package webhook

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hyperbatch/hyperbatch/webhook/defaults"
)

// Warnings are shown by kubectl as "Warning: ..."; the apiserver truncates a response's warnings
// beyond 4096 runes in total, so ours stay well below.
const (
	maxWarningRunes = 1500
	maxValueRunes   = 120
	warningPrefix   = "hyperbatch: "
)

// parseSources reads a defaulted-by value into short field name -> source. The engine fills each
// field from one source per call, so the map is exact for a value that holds one call's account.
func parseSources(defaultedBy string) map[string]string {
	out := map[string]string{}
	for _, entry := range strings.Split(defaultedBy, ";") {
		source, fields, ok := strings.Cut(strings.TrimSpace(entry), "/")
		if !ok {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out[f] = source
			}
		}
	}
	return out
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
	case strings.HasSuffix(path, "ttlSecondsAfterFinished"), strings.Contains(path, defaults.TTLSecondsAfterFinishedAnnotation):
		return defaults.FieldTTLSecondsAfterFinished
	case strings.Contains(path, defaults.ActiveDeadlineSecondsAnnotation):
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
func defaultedWarning(fields []string, obj map[string]any, sources map[string]string, note string) string {
	var order []string
	groups := map[string][]string{}
	for _, p := range fields {
		src := describeSource(sources[shortField(p)])
		if _, ok := groups[src]; !ok {
			order = append(order, src)
		}
		groups[src] = append(groups[src], p+"="+valueAt(obj, p))
	}
	parts := make([]string, 0, len(order)+1)
	for _, src := range order {
		parts = append(parts, strings.Join(groups[src], ", ")+" from "+src)
	}
	if note != "" {
		parts = append(parts, note)
	}
	return clip(warningPrefix + "defaulted " + strings.Join(parts, "; "))
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
	return string([]rune(s)[:maxWarningRunes]) + "… (see the " + defaults.DefaultedByAnnotation + " annotation)"
}
