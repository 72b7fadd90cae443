package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Results of one admission request, the "result" label.
const (
	resultAllowed = "allowed" // admitted unchanged
	resultPatched = "patched" // admitted with defaults filled
	resultDenied  = "denied"  // rejected: policy, lifecycle or shape violation, missing PriorityClass
	resultError   = "error"   // could not be judged: malformed request, cache error
)

var (
	// admissionRequests is hyperbatch_webhook_admission_requests_total{webhook,kind,operation,result}.
	admissionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hyperbatch_webhook_admission_requests_total",
		Help: "Admission requests handled by hyperbatch's webhooks, by webhook (mutating|validating), kind, operation and result (allowed|patched|denied|error).",
	}, []string{"webhook", "kind", "operation", "result"})

	// admissionDuration is hyperbatch_webhook_admission_duration_seconds{webhook,kind,operation}.
	admissionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hyperbatch_webhook_admission_duration_seconds",
		Help:    "Time hyperbatch's webhooks spend on one admission request (decoding to response), by webhook, kind and operation.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"webhook", "kind", "operation"})

	// webhookPanics is hyperbatch_webhook_panics_total: handler panics answered with a 500.
	webhookPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hyperbatch_webhook_panics_total",
		Help: "Admission handler panics, each answered with HTTP 500 (the apiserver then applies the webhook's failurePolicy).",
	})

	// policyCount is hyperbatch_webhook_workloadpolicies: the usable policies in the last build.
	policyCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hyperbatch_webhook_workloadpolicies",
		Help: "WorkloadPolicies with a valid selector that the webhooks currently apply.",
	})
)

func init() {
	metrics.Registry.MustRegister(admissionRequests, admissionDuration, webhookPanics, policyCount)
}

func observe(webhook string, kind Kind, operation, result string, start time.Time) {
	admissionRequests.WithLabelValues(webhook, string(kind), operation, result).Inc()
	admissionDuration.WithLabelValues(webhook, string(kind), operation).Observe(time.Since(start).Seconds())
}

// timed runs one request's handler and counts and times it under its result.
func timed(webhook string, kind Kind, req admission.Request, handle func() (admission.Response, string)) admission.Response {
	start := time.Now()
	resp, result := handle()
	observe(webhook, kind, string(req.Operation), result, start)
	return resp
}
