package hyperjob

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

func TestChildrenGauge(t *testing.T) {
	a := types.NamespacedName{Namespace: "gauge-ns", Name: "a"}
	b := types.NamespacedName{Namespace: "gauge-ns", Name: "b"}
	setChildren(a, 3)
	setChildren(b, 5)
	setChildren(a, 4)
	if got := testutil.ToFloat64(childrenGauge.WithLabelValues("gauge-ns")); got != 9 {
		t.Fatalf("gauge = %v, want 9", got)
	}
	setChildren(a, -1)
	setChildren(b, -1)
	if n := testutil.CollectAndCount(childrenGauge); n != 0 {
		t.Fatalf("%d series left after every HyperJob is gone, want 0 (no stale namespace series)", n)
	}
}
