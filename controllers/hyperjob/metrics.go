package hyperjob

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics, registered in controller-runtime's metrics.Registry (served on the manager's /metrics).
// Labels are bounded: the children gauge is per namespace (not per HyperJob, whose names are
// unbounded), the error counter per operation from a fixed set.
var (
	childrenGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hyperbatch_hyperjob_children",
		Help: "Child Volcano Jobs (each with a PropagationPolicy) the HyperJobs of a namespace are split into (sum of status.splitCount).",
	}, []string{"namespace"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_hyperjob_reconcile_errors_total",
		Help: "HyperJob reconcile errors by operation: read, create_job, apply_propagationpolicy, delete_job, delete_propagationpolicy, conflict, status.",
	}, []string{"operation"})

	autoDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_hyperjob_auto_split_decisions_total",
		Help: "Decisions of splitPolicy mode auto by result: decided (a split written), refused (no split fits; the HyperJob waits), error (members or HyperJobs could not be read, or the split not written).",
	}, []string{"result"})
	autoDecisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hyperbatch_hyperjob_auto_split_decision_seconds",
		Help:    "Time to decide one HyperJob in mode auto, reading every candidate member through Karmada's cluster proxy included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	})
	autoClusters = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hyperbatch_hyperjob_auto_split_clusters",
		Help:    "Member clusters a decided auto split uses.",
		Buckets: []float64{1, 2, 3, 4, 6, 8, 16},
	})

	registerOnce sync.Once
)

// Results counted by hyperbatch_hyperjob_auto_split_decisions_total.
const (
	resultDecided = "decided"
	resultRefused = "refused"
	resultError   = "error"
)

// Operations counted by hyperbatch_hyperjob_reconcile_errors_total.
const (
	opRead     = "read"
	opCreate   = "create_job"
	opApplyPP  = "apply_propagationpolicy"
	opDelete   = "delete_job"
	opDeletePP = "delete_propagationpolicy"
	opConflict = "conflict"
	opStatus   = "status"
	opRelease  = "release_job"
)

func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(childrenGauge, reconcileErrors, autoDecisions, autoDecisionSeconds, autoClusters)
		for _, r := range []string{resultDecided, resultRefused, resultError} {
			autoDecisions.WithLabelValues(r)
		}
		for _, op := range []string{opRead, opCreate, opApplyPP, opDelete, opDeletePP, opConflict, opStatus, opRelease} {
			reconcileErrors.WithLabelValues(op)
		}
	})
}

// childCounts keeps each HyperJob's contribution to the per-namespace gauge, process-wide like the
// gauge itself.
var childCounts = struct {
	sync.Mutex
	byJob map[types.NamespacedName]int32
	byNS  map[string]int32
}{byJob: map[types.NamespacedName]int32{}, byNS: map[string]int32{}}

// setChildren records that key is split into n children (n < 0 forgets it: the HyperJob is gone).
func setChildren(key types.NamespacedName, n int32) {
	childCounts.Lock()
	defer childCounts.Unlock()
	old := childCounts.byJob[key]
	if n < 0 {
		delete(childCounts.byJob, key)
		n = 0
	} else {
		childCounts.byJob[key] = n
	}
	if old == n {
		return
	}
	sum := childCounts.byNS[key.Namespace] - old + n
	if sum == 0 {
		delete(childCounts.byNS, key.Namespace)
		childrenGauge.DeleteLabelValues(key.Namespace)
		return
	}
	childCounts.byNS[key.Namespace] = sum
	childrenGauge.WithLabelValues(key.Namespace).Set(float64(sum))
}
