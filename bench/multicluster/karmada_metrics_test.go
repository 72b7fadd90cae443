package multicluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// series is one scraped Prometheus sample: the metric's name, its labels as written, its value.
type series struct {
	name, labels string
	value        float64
}

// scrape is every sample of one /metrics page (Prometheus text format).
type scrape []series

// parseMetrics reads the text format: "name{labels} value" or "name value", comments skipped.
func parseMetrics(r io.Reader) (scrape, error) {
	var out scrape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		head := line[:i]
		s := series{name: head, value: v}
		if j := strings.IndexByte(head, '{'); j >= 0 {
			s.name, s.labels = head[:j], head[j:]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// label is the value of label key in a series' label string ("" when absent).
func (s series) label(key string) string {
	k := key + `="`
	i := strings.Index(s.labels, k)
	if i < 0 {
		return ""
	}
	rest := s.labels[i+len(k):]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// sumBy sums the samples of metric name by the value of label key ("" key: one total under "").
func (sc scrape) sumBy(name, key string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range sc {
		if s.name == name {
			out[s.label(key)] += s.value
		}
	}
	return out
}

// karmadaScrapes are the /metrics pages of the plane's controller-manager, scheduler and
// kube-apiserver at one moment.
type karmadaScrapes struct {
	controllerManager, scheduler, apiserver scrape
}

func scrapeHTTP(ctx context.Context, url string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// scrapeKarmada reads the three pages (the apiserver's through the admin client).
func scrapeKarmada(ctx context.Context, c localproc.Cluster, cfg *rest.Config) (karmadaScrapes, error) {
	var out karmadaScrapes
	pt := c.Ports()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if out.controllerManager, err = scrapeHTTP(ctx, "http://"+localproc.Loopback(pt.KarmadaControllerMetrics)+"/metrics"); err != nil {
		return out, err
	}
	if out.scheduler, err = scrapeHTTP(ctx, "http://"+localproc.Loopback(pt.KarmadaSchedulerMetrics)+"/metrics"); err != nil {
		return out, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return out, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out, fmt.Errorf("scraping the Karmada apiserver's /metrics: %w", err)
	}
	out.apiserver, err = parseMetrics(bytes.NewReader(raw))
	return out, err
}

// delta is after − before of sumBy(name, key).
func delta(before, after scrape, name, key string) map[string]float64 {
	b, a := before.sumBy(name, key), after.sumBy(name, key)
	for k, v := range b {
		a[k] -= v
	}
	return a
}

// karmadaReport is where Karmada's time went during a case, from the components' own metrics: per
// work queue of karmada-controller-manager and karmada-scheduler, items added, seconds items
// waited in the queue and seconds of work; the time requests waited on the client-side rate
// limiter; the Karmada apiserver's requests and its priority-and-fairness queueing.
func karmadaReport(before, after karmadaScrapes, wall time.Duration) []string {
	var lines []string
	queues := func(who string, b, a scrape) {
		adds := delta(b, a, "workqueue_adds_total", "name")
		wait := delta(b, a, "workqueue_queue_duration_seconds_sum", "name")
		work := delta(b, a, "workqueue_work_duration_seconds_sum", "name")
		retries := delta(b, a, "workqueue_retries_total", "name")
		var names []string
		for n, v := range adds {
			if v > 0 {
				names = append(names, n)
			}
		}
		sort.Slice(names, func(i, j int) bool { return wait[names[i]] > wait[names[j]] })
		for _, n := range names {
			lines = append(lines, fmt.Sprintf("  %s queue %-40s adds %6.0f  retries %5.0f  waited in queue %8.1f s (mean %6.2f s)  worked %7.1f s (mean %5.3f s)",
				who, n, adds[n], retries[n], wait[n], wait[n]/adds[n], work[n], work[n]/adds[n]))
		}
		rl := delta(b, a, "rest_client_rate_limiter_duration_seconds_sum", "")[""]
		rln := delta(b, a, "rest_client_rate_limiter_duration_seconds_count", "")[""]
		reqs := 0.0
		for _, v := range delta(b, a, "rest_client_requests_total", "") {
			reqs += v
		}
		limiter := fmt.Sprintf("waited on the client-side rate limiter %.1f s in all over %.0f waits", rl, rln)
		if len(a.sumBy("rest_client_rate_limiter_duration_seconds_count", "")) == 0 {
			limiter = "its client-side rate limiter's wait is not exported (no rest_client_rate_limiter_duration_seconds)"
		}
		lines = append(lines, fmt.Sprintf("  %s client: %.0f requests (%.1f/s); %s", who, reqs, reqs/wall.Seconds(), limiter))
	}
	queues("karmada-controller-manager", before.controllerManager, after.controllerManager)
	queues("karmada-scheduler", before.scheduler, after.scheduler)
	if e2e := delta(before.scheduler, after.scheduler, "karmada_scheduler_e2e_scheduling_duration_seconds_count", ""); e2e[""] > 0 {
		sum := delta(before.scheduler, after.scheduler, "karmada_scheduler_e2e_scheduling_duration_seconds_sum", "")[""]
		lines = append(lines, fmt.Sprintf("  karmada-scheduler: %.0f schedulings, mean %.3f s each (karmada_scheduler_e2e_scheduling_duration_seconds)", e2e[""], sum/e2e[""]))
	}
	reqs := delta(before.apiserver, after.apiserver, "apiserver_request_total", "verb")
	var total float64
	var verbs []string
	for v, n := range reqs {
		total += n
		if n > 0 {
			verbs = append(verbs, fmt.Sprintf("%s %.0f", v, n))
		}
	}
	sort.Strings(verbs)
	apf := delta(before.apiserver, after.apiserver, "apiserver_flowcontrol_request_wait_duration_seconds_sum", "")[""]
	apfn := delta(before.apiserver, after.apiserver, "apiserver_flowcontrol_request_wait_duration_seconds_count", "")[""]
	lines = append(lines, fmt.Sprintf("  Karmada apiserver: %.0f requests (%.1f/s: %s); priority-and-fairness queueing %.1f s over %.0f requests",
		total, total/wall.Seconds(), strings.Join(verbs, ", "), apf, apfn))
	var closed []string
	for r, n := range delta(before.apiserver, after.apiserver, "apiserver_terminated_watchers_total", "resource") {
		if n > 0 {
			closed = append(closed, fmt.Sprintf("%s %.0f", r, n))
		}
	}
	sort.Strings(closed)
	if len(closed) == 0 {
		closed = []string{"none"}
	}
	lines = append(lines, "  Karmada apiserver: watches it closed because the watcher fell behind (apiserver_terminated_watchers_total): "+strings.Join(closed, ", "))
	return lines
}
