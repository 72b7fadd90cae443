package webhook

import (
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/jsonpatch"
)

const warningPrefix = defaults.WarningPrefix

// defaultedWarning is defaults.DefaultedWarning with the values read from the patched object.
func defaultedWarning(fills []defaults.Fill, obj jsonpatch.Doc, note string) string {
	return defaults.DefaultedWarning(fills, obj.Value, note)
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
		out[i] = defaults.ClipWarning(warningPrefix + s.String())
	}
	return out
}
