package lifecycle

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Kinds and actions, the label values of the metrics (fixed sets: bounded cardinality).
const (
	KindHyperJob = "HyperJob"
	KindJobSet   = "JobSet"
	KindVCJob    = "VolcanoJob"
	KindTrainJob = "TrainJob"

	// ActionDeadline: the workload was ended for DeadlineExceeded (HyperJob: Failed condition written;
	// JobSet: Failed condition written; Volcano Job: AbortJob decided and recorded).
	ActionDeadline = "deadline"
	// ActionAbortChild: a HyperJob's child Volcano Job was aborted because the HyperJob's deadline passed.
	ActionAbortChild = "abort_child"
	// ActionTTLDelete: this controller deleted a finished HyperJob or TrainJob whose TTL expired.
	ActionTTLDelete = "ttl_delete"
	// ActionNativeTTLDelete: a finished JobSet or Volcano Job with a native spec.ttlSecondsAfterFinished
	// was deleted by its own controller (observed here, not performed).
	ActionNativeTTLDelete = "native_ttl_delete"
)

// Metrics, registered in controller-runtime's metrics.Registry (served on the manager's /metrics).
var (
	actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_lifecycle_actions_total",
		Help: "Lifecycle actions by workload kind (HyperJob, JobSet, VolcanoJob, TrainJob) and action (deadline, abort_child, ttl_delete, native_ttl_delete).",
	}, []string{"kind", "action"})
	// actionLag is the seed's ttl_deletion_latency_seconds generalised to every lifecycle action.
	actionLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperbatch_lifecycle_action_lag_seconds",
		Help:    "Time from an action's due time (deadline or TTL expiry, from the object's timestamps) to the action. For native_ttl_delete it is the deletion time the apiserver recorded (or the time the deletion was observed) minus the due time.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300},
	}, []string{"kind", "action"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_lifecycle_reconcile_errors_total",
		Help: "Lifecycle reconcile errors by workload kind.",
	}, []string{"kind"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(actionsTotal, actionLag, reconcileErrors)
		for _, k := range []string{KindHyperJob, KindJobSet, KindVCJob, KindTrainJob} {
			reconcileErrors.WithLabelValues(k)
		}
	})
}

// observe counts one action and its lag (negative lags, from clock skew, count as 0).
func observe(kind, action string, at, due time.Time) {
	actionsTotal.WithLabelValues(kind, action).Inc()
	lag := at.Sub(due).Seconds()
	if lag < 0 {
		lag = 0
	}
	actionLag.WithLabelValues(kind, action).Observe(lag)
}
