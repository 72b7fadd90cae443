package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileTotal is how many reconciles the named controller of a manager running in this test
// process has finished (controller-runtime's controller_runtime_reconcile_total, every result). A
// test that checks a controller did NOT act waits for this count to grow first: the positive signal
// that the controller has looked at the objects in question.
func ReconcileTotal(controller string) (float64, error) {
	return ControllerMetric("controller_runtime_reconcile_total", map[string]string{"controller": controller})
}

// ControllerMetric sums a metric of controller-runtime's registry (the managers and webhooks
// running in this test process, hyperbatch's own metrics among them) over the series whose labels
// include labels, as ComponentMetric does.
func ControllerMetric(name string, labels map[string]string) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("gathering controller-runtime metrics: %w", err)
	}
	return sumSeries(families, name, labels), nil
}

// Eventually polls cond every 100ms until it reports true with no error, and fails the test after
// timeout naming what it waited for and the condition's last error (an error does not stop the
// polling: an object may not exist yet).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	require.NoError(t, err, "timed out after %s waiting for %s (last error: %v)", timeout, what, last)
}

// ComponentMetric sums a metric of the Kubernetes components' registry (legacyregistry: the
// in-process kube-scheduler and its plugins) over the series whose labels include labels: a
// counter's or gauge's value, a histogram's sample sum. 0 when no series matches.
func ComponentMetric(name string, labels map[string]string) (float64, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, fmt.Errorf("gathering component metrics: %w", err)
	}
	return sumSeries(families, name, labels), nil
}

// sumSeries sums metric name over the series whose labels include labels: a counter's or gauge's
// value, a histogram's sample sum.
func sumSeries(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	var total float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				total += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return total
}
