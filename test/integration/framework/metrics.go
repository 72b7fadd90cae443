package framework

import (
	"fmt"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileTotal is how many reconciles the named controller of a manager running in this test
// process has finished (controller-runtime's controller_runtime_reconcile_total, every result). A
// test that checks a controller did NOT act waits for this count to grow first: the positive signal
// that the controller has looked at the objects in question.
func ReconcileTotal(controller string) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("gathering controller-runtime metrics: %w", err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total, nil
}
