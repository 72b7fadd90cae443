package hypernode

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_discovery_writes_total",
		Help: "HyperNode writes by discovery, by source, type (Create, Update, Delete) and result (ok, error, skipped).",
	}, []string{"source", "type", "result"})
	writeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperbatch_discovery_write_duration_seconds",
		Help:    "Time to write one HyperNode event, retries included, by source.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}, []string{"source"})
	roundsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_discovery_rounds_total",
		Help: "Discovery rounds by source and result: unchanged (nothing written), changed, error (the source could not be read or the tree not built; nothing written), write_error.",
	}, []string{"source", "result"})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperbatch_discovery_last_success_timestamp_seconds",
		Help: "Unix time of the last discovery round that finished without error, by source.",
	}, []string{"source"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(writesTotal, writeSeconds, roundsTotal, lastSuccess) })
}
