package multicluster

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKarmadaReportFromScrapes checks the text parser and the report on a page in Prometheus' text
// format as karmada-controller-manager writes it.
func TestKarmadaReportFromScrapes(t *testing.T) {
	page := func(adds, wait float64) scrape {
		s, err := parseMetrics(strings.NewReader(strings.Join([]string{
			"# HELP workqueue_adds_total Total number of adds handled by workqueue",
			"# TYPE workqueue_adds_total counter",
			`workqueue_adds_total{controller="resource-detector",name="resource-detector"} ` + ftoa(adds),
			`workqueue_queue_duration_seconds_sum{name="resource-detector"} ` + ftoa(wait),
			`workqueue_work_duration_seconds_sum{name="resource-detector"} 1`,
			`rest_client_rate_limiter_duration_seconds_sum{verb="POST",host="127.0.0.1:1"} 2.5`,
			`rest_client_rate_limiter_duration_seconds_count{verb="POST",host="127.0.0.1:1"} 5`,
			`rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 7`,
			`apiserver_request_total{code="201",verb="POST",resource="jobs"} 11`,
		}, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before, after := page(10, 4), page(110, 54)
	got := strings.Join(karmadaReport(karmadaScrapes{before, before, before}, karmadaScrapes{after, after, after}, 10*time.Second), "\n")
	for _, want := range []string{"resource-detector", "adds    100", "waited in queue     50.0 s (mean   0.50 s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
