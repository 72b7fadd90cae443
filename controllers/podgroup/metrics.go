package podgroup

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_podgroup_writes_total",
		Help: "PodGroup writes by the podgroup controller, by operation (apply, delete, price: minResources of Trainer's PodGroup; subgroups: its subGroupPolicy) and result (ok, error).",
	}, []string{"operation", "result"})
	foreign = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hyperbatch_podgroup_foreign_total",
		Help: "Foreign PodGroups (same name as a gang JobSet, not controlled by it) found and left alone.",
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { metrics.Registry.MustRegister(writes, foreign) })
}
