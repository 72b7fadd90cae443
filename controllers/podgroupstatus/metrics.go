package podgroupstatus

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics, registered in controller-runtime's metrics.Registry. Labels come from fixed sets.
var (
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_podgroupstatus_writes_total",
		Help: "PodGroup status writes by what changed: phase (phase or a condition's status/reason, written at once) or detail (counts or messages only, rate-limited).",
	}, []string{"change"})
	enqueueSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hyperbatch_podgroupstatus_enqueue_seconds",
		Help:    "Time from a served PodGroup's creation to this controller writing it Inqueue.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
	refusalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_podgroupstatus_enqueue_refusals_total",
		Help: "Enqueue refusals that changed a PodGroup's Unschedulable reason, by reason.",
	}, []string{"reason"})

	notServedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hyperbatch_podgroupstatus_not_served_total",
		Help: "Reconciles of PodGroups this controller does not serve (another scheduler's, or no owning Job and no pods yet); nothing is written to them.",
	})

	registerOnce sync.Once
)

const (
	changePhase  = "phase"
	changeDetail = "detail"
)

func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(writesTotal, enqueueSeconds, refusalsTotal, notServedTotal)
		writesTotal.WithLabelValues(changePhase)
		writesTotal.WithLabelValues(changeDetail)
		for _, r := range []string{ReasonQueueNotFound, ReasonQueueClosed, ReasonQueueCapabilityExceeded, ReasonQueueFIFO} {
			refusalsTotal.WithLabelValues(r)
		}
	})
}
