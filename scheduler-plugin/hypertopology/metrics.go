package hypertopology

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// domainChoices counts the gang domain choices PreFilter made (a cached placement reused is not
// counted): about one per gang; more when capacity changed under a plan or the gang's PodGroup
// changed what its placement depends on.
var domainChoices = metrics.NewCounter(&metrics.CounterOpts{
	Name:           "hyperbatch_scheduler_gang_domain_choices_total",
	Help:           "Gang domain choices made by the HyperTopology plugin's PreFilter (cached placements reused are not counted).",
	StabilityLevel: metrics.ALPHA,
})

// preemptions counts the gang preemptions: domains cleared for a gang.
var preemptions = metrics.NewCounter(&metrics.CounterOpts{
	Name:           "hyperbatch_scheduler_gang_preemptions_total",
	Help:           "Domains the HyperTopology plugin cleared for a gang by preempting lower-priority pods.",
	StabilityLevel: metrics.ALPHA,
})

// victimsPerPreemption is the number of pods evicted per gang preemption.
var victimsPerPreemption = metrics.NewHistogram(&metrics.HistogramOpts{
	Name:           "hyperbatch_scheduler_gang_preemption_victim_pods",
	Help:           "Pods evicted per gang preemption (whole victim gangs and lone pods).",
	Buckets:        metrics.ExponentialBuckets(1, 2, 12),
	StabilityLevel: metrics.ALPHA,
})

// clearedTier counts gang preemptions by the tier of the cleared domain ("cluster" for the root).
var clearedTier = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "hyperbatch_scheduler_gang_preemption_domain_tier_total",
	Help:           "Gang preemptions by the HyperNode tier of the cleared domain (\"cluster\" for the whole cluster).",
	StabilityLevel: metrics.ALPHA,
}, []string{"tier"})

// placementWrites counts the PodGroup patches of gangcontract.PlacementAnnotation (placement.go):
// at most one per waiting gang per PlacementWriteInterval, and one when a gang that waited is placed.
var placementWrites = metrics.NewCounter(&metrics.CounterOpts{
	Name:           "hyperbatch_scheduler_placement_annotation_writes_total",
	Help:           "PodGroup patches writing or removing the hyperbatch.dev/placement annotation (why a gang waits, in numbers).",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(domainChoices, preemptions, victimsPerPreemption, clearedTier, placementWrites)
	})
}
