// Package webhook_test benchmarks hyperbatch's admission webhooks as the apiserver meets them: served
// over TLS on loopback by the real manager (policies and namespaces from informers), next to a no-op
// webhook served by the same server in the same run, at concurrency 64. A second benchmark creates
// 10,000 Pods through a real kube-apiserver with the webhooks installed and counts failures.
//
// Results (with ratios against the no-op webhook of the same run, given the same request body) are
// written to bench/results/webhook.txt.
package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/admissionparams"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

const (
	concurrency = 64
	requests    = 20000 // per latency benchmark
	burstPods   = 10000
	noopPath    = "/bench-noop"
	// onePatchPath is a webhook that answers every Pod with a one-operation patch (the annotation
	// floorPatchAnnotation): the least a webhook that changes the Pod costs the apiserver.
	onePatchPath         = "/bench-one-patch"
	floorPatchAnnotation = "bench.hyperbatch.dev/floor-patch"
	benchNS              = "bench"
)

var (
	w       *framework.WebhookEnv
	mu      sync.Mutex
	results = map[string]stats{}
	// noopCalls counts the no-op webhook's requests (the burst's floor rounds check that every Pod
	// went through it).
	noopCalls atomic.Int64
)

type stats struct {
	p50, p99 time.Duration
	rps      float64
	failures int64
}

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietErrors)
	var err error
	w, err = framework.StartWithWebhooks(framework.WebhookEnvOptions{
		Fixtures: []client.Object{
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}, Value: 1000},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS, Labels: map[string]string{
				"team": "bench", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}}},
			&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: hbv1.WorkloadPolicySpec{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "bench"}},
				Defaults:          hbv1.PolicyDefaults{Queue: "bench", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler"},
				AllowedQueues:     []string{"bench"},
			}},
		},
		Register: func(mgr manager.Manager) error {
			// The same plumbing as hyperbatch's handlers (hbwebhook.NewAdmissionWebhook), so the
			// ratios measure the handlers alone.
			mgr.GetWebhookServer().Register(noopPath, hbwebhook.NewAdmissionWebhook(admission.HandlerFunc(
				func(context.Context, admission.Request) admission.Response {
					noopCalls.Add(1)
					return admission.Allowed("")
				})))
			mgr.GetWebhookServer().Register(onePatchPath, hbwebhook.NewAdmissionWebhook(admission.HandlerFunc(
				func(context.Context, admission.Request) admission.Response {
					noopCalls.Add(1)
					// The bench's Pods have no annotations: the patch adds the map.
					return admission.Patched("", jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations",
						Value: map[string]any{floorPatchAnnotation: "1"}})
				})))
			// The admission policies' params of the bench namespace (BenchmarkAdmissionModes).
			return admissionparams.NewReconciler(mgr, hbwebhook.DefaultNamespace).SetupWithManager(mgr)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	w.Stop()
	if err := writeResults(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func review(b *testing.B, obj any, gvk metav1.GroupVersionKind, resource metav1.GroupVersionResource) []byte {
	b.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	r := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: uuid.NewUUID(), Kind: gvk, Resource: resource,
			Namespace: benchNS, Operation: admissionv1.Create, Object: runtimeRaw(raw)}}
	out, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func pod() *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: benchNS},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

func vcjob() *batchv1alpha1.Job {
	return &batchv1alpha1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: benchNS},
		Spec: batchv1alpha1.JobSpec{MinAvailable: 8, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 8,
			Template: corev1.PodTemplateSpec{Spec: pod().Spec}}}}}
}

func httpClient(b *testing.B) *http.Client { return tlsClient(b, w.CAData) }

// tlsClient is the load generator's client: HTTP/1.1 over TLS with ca as the only root, up to
// `concurrency` connections.
func tlsClient(b *testing.B, ca []byte) *http.Client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		b.Fatal("no CA for the webhook server")
	}
	return tlsClientFor(ca)
}

func tlsClientFor(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency, ForceAttemptHTTP2: false}}
}

// parallel runs work(i) for every i in [0, n) on `concurrency` workers and returns the wall time.
// newWorker is called once per worker and returns that worker's function, which may keep its own
// buffers.
func parallel(n int, newWorker func() func(i int)) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				work(int(i))
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// load sends n AdmissionReviews to path from `concurrency` workers and returns latency statistics.
// A request's latency ends when its answer has been read. Every answer is checked with byte
// searches (allowed, and a JSON patch exactly when wantPatch); the first one of each call is also
// decoded whole and checked. Decoding every answer would put the load generator's JSON decoding,
// which grows with the answer and runs on the same two cores, into the server's figures.
func load(b *testing.B, path string, body []byte, wantPatch bool, n int) stats {
	c := httpClient(b)
	if err := checkWholeAt(c, w.URL+path, body, wantPatch); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	lat := make([]time.Duration, n)
	var failures atomic.Int64
	elapsed := parallel(n, func() func(int) {
		var buf bytes.Buffer
		return func(i int) {
			buf.Reset()
			t := time.Now()
			resp, err := c.Post(w.URL+path, "application/json", bytes.NewReader(body))
			if err == nil {
				_, err = buf.ReadFrom(resp.Body)
				_ = resp.Body.Close()
			}
			lat[i] = time.Since(t)
			if err == nil {
				err = checkAnswer(resp.StatusCode, buf.Bytes(), wantPatch)
			}
			if err != nil {
				failures.Add(1)
			}
		}
	})
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return stats{p50: lat[n/2], p99: lat[n*99/100], rps: float64(n) / elapsed.Seconds(), failures: failures.Load()}
}

// checkAnswer is the cheap check of every answer. controller-runtime writes the AdmissionReview
// with encoding/json, so the members appear exactly so.
func checkAnswer(status int, answer []byte, wantPatch bool) error {
	switch {
	case status != http.StatusOK:
		return fmt.Errorf("HTTP %d: %s", status, answer)
	case !bytes.Contains(answer, []byte(`"allowed":true`)):
		return fmt.Errorf("not allowed: %s", answer)
	case wantPatch != bytes.Contains(answer, []byte(`"patchType":"JSONPatch"`)):
		return fmt.Errorf("want a JSON patch: %v, got: %s", wantPatch, answer)
	}
	return nil
}

// checkWholeAt sends one request to url and checks its decoded answer: the request's UID, allowed,
// and (when wantPatch) a JSON patch of at least one operation, or no patch at all.
func checkWholeAt(c *http.Client, url string, body []byte, wantPatch bool) error {
	var req admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := checkAnswer(resp.StatusCode, raw, wantPatch); err != nil {
		return err
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("answer is not an AdmissionReview: %w", err)
	}
	r := out.Response
	switch {
	case r == nil || r.UID != req.Request.UID || !r.Allowed:
		return fmt.Errorf("answer %+v does not allow request %s", r, req.Request.UID)
	case !wantPatch && len(r.Patch) > 0:
		return fmt.Errorf("a patch from the no-op: %s", r.Patch)
	case wantPatch:
		var ops []map[string]any
		if err := json.Unmarshal(r.Patch, &ops); err != nil {
			return fmt.Errorf("patch %s is not a JSON patch: %w", r.Patch, err)
		}
		if len(ops) == 0 {
			return fmt.Errorf("patch %s has no operations", r.Patch)
		}
	}
	return nil
}

func record(b *testing.B, name string, s stats) {
	b.ReportMetric(float64(s.p50.Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(s.p99.Microseconds())/1000, name+"-p99-ms")
	b.ReportMetric(s.rps, name+"-req/s")
	b.ReportMetric(float64(s.failures), name+"-failures")
	mu.Lock()
	results[name] = s
	mu.Unlock()
	if s.failures > 0 {
		b.Errorf("%s: %d of the requests failed", name, s.failures)
	}
}

// rounds: each latency case runs this many times, interleaved with the others, and reports its
// median round, so a slow spell of the machine does not land on one case only.
const rounds = 5

// BenchmarkAdmissionLatency: each iteration runs every case `rounds` times, interleaved, each round
// 20,000 requests at concurrency 64. Every mutating handler has its own no-op baseline that gets
// the same request body (a Volcano Job's AdmissionReview is three times a Pod's), so a ratio
// measures what the handler adds, not the size of the request.
func BenchmarkAdmissionLatency(b *testing.B) {
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	podBody := review(b, pod(), podGVK, podGVR)
	jobBody := review(b, vcjob(),
		metav1.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"},
		metav1.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"})
	type benchCase struct {
		name, path string
		body       []byte
		patches    bool // the answer must carry a JSON patch
	}
	cases := []benchCase{
		{"noop-pod", noopPath, podBody, false},
		{"pod", "/mutate-pod", podBody, true},
		{"noop-volcanojob", noopPath, jobBody, false},
		{"volcanojob", "/mutate-volcano-job", jobBody, true},
	}
	if only := os.Getenv("HYPERBATCH_BENCH_CASES"); only != "" { // e.g. "noop-pod" to profile one case; no results written
		partialLatency.Store(true)
		cases = slices.DeleteFunc(cases, func(c benchCase) bool { return !slices.Contains(strings.Split(only, ","), c.name) })
	}
	for _, tc := range cases {
		load(b, tc.path, tc.body, tc.patches, 2000) // warm connections and caches
	}
	for i := 0; i < b.N; i++ {
		runs := map[string][]stats{}
		for r := 0; r < rounds; r++ {
			for _, tc := range cases {
				runs[tc.name] = append(runs[tc.name], load(b, tc.path, tc.body, tc.patches, requests))
			}
		}
		for _, tc := range cases {
			record(b, tc.name, median(runs[tc.name]))
		}
	}
}

// median is the round with the median p99.
func median(runs []stats) stats {
	sort.Slice(runs, func(i, j int) bool { return runs[i].p99 < runs[j].p99 })
	return runs[len(runs)/2]
}

// BenchmarkPodBurst creates 10,000 Pods through the real apiserver six times, in three setups, in
// the order hyperbatch, floor, none, none, floor, hyperbatch:
//   - hyperbatch: hyperbatch's webhook configurations installed (every Pod of the governed bench
//     namespace is defaulted and checked by pod.mutate in one call);
//   - floor: only one mutating entry for the bench namespace's Pods, calling a no-op webhook that
//     answers "allowed" without a patch: the least any admission webhook can cost the apiserver;
//   - none: no webhook configuration.
//
// Every creation must succeed; with hyperbatch's webhooks every Pod must be defaulted, otherwise
// none may be, and in the floor rounds the no-op must have been called once per Pod. Between rounds
// the configurations are deleted or created, and the next round starts once a probe Pod shows the
// apiserver follows the change.
func BenchmarkPodBurst(b *testing.B) {
	c, mwc, vwc := burstClient(b)
	setups := map[burstSetup][]client.Object{
		setupHyperbatch: {mwc, vwc},
		setupFloor:      {floorConfiguration(mwc.Webhooks[0].ClientConfig)},
	}
	for iter := 0; iter < b.N; iter++ {
		rates := map[burstSetup][]float64{}
		for round, setup := range []burstSetup{setupHyperbatch, setupFloor, setupNone, setupNone, setupFloor, setupHyperbatch} {
			useSetup(b, c, setups, setup, fmt.Sprintf("%d-%d", iter, round))
			rates[setup] = append(rates[setup], burst(b, c, fmt.Sprintf("burst-%d-%d", iter, round), setup).rps)
		}
		useSetup(b, c, setups, setupHyperbatch, fmt.Sprintf("%d-end", iter))
		sw, sf, sn := mean(rates[setupHyperbatch]), mean(rates[setupFloor]), mean(rates[setupNone])
		b.ReportMetric(sw, "pods/s")
		b.ReportMetric(sf, "floor-pods/s")
		b.ReportMetric(sn, "no-webhook-pods/s")
		b.ReportMetric(sw/sn, "with/without")
		mu.Lock()
		results["burst"] = stats{rps: sw}
		results["burst-floor"] = stats{rps: sf}
		results["burst-none"] = stats{rps: sn}
		burstRuns = fmt.Sprintf("rounds with hyperbatch %s, floor %s, none %s", joinRates(rates[setupHyperbatch]), joinRates(rates[setupFloor]), joinRates(rates[setupNone]))
		mu.Unlock()
	}
}

// burstClient is a client without client-side rate limits for the bursts, and hyperbatch's webhook
// configurations as installed.
func burstClient(b *testing.B) (client.Client, *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	cfg := *w.Config
	cfg.QPS, cfg.Burst = 5000, 5000
	c, err := client.New(&cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: hbwebhook.MutatingConfigurationName}, &mwc); err != nil {
		b.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: hbwebhook.ValidatingConfigurationName}, &vwc); err != nil {
		b.Fatal(err)
	}
	return c, &mwc, &vwc
}

// burstSetup is the admission set-up of one burst round.
type burstSetup string

const (
	setupHyperbatch burstSetup = "hyperbatch"
	setupFloor      burstSetup = "floor"
	setupNone       burstSetup = "none"
	// setupPolicy: hyperbatch's admission policies (policy mode), no webhook for Pods.
	setupPolicy burstSetup = "policy"
	// setupPolicyMutate: policy mode's CREATE MutatingAdmissionPolicy alone; setupPolicyMutateChecks:
	// with the checks ValidatingAdmissionPolicy (BenchmarkAdmissionModes' breakdown of policy).
	setupPolicyMutate       burstSetup = "policy-mutate"
	setupPolicyMutateChecks burstSetup = "policy-mutate-checks"
	// setupMAPNoop: one MutatingAdmissionPolicy that changes no burst Pod; setupVAPNoop: one
	// ValidatingAdmissionPolicy that refuses no burst Pod (BenchmarkAdmissionModes).
	// setupFloorPatch: one mutating webhook that answers with a one-operation patch.
	setupFloorPatch burstSetup = "floor-patch"
	setupMAPNoop    burstSetup = "map-noop"
	setupMAPNoopAC  burstSetup = "map-noop-ac"
	// setupMAPPatch: one MutatingAdmissionPolicy whose JSON patch is floor-patch's one operation,
	// for every Pod: the least a policy that changes the Pod costs.
	setupMAPPatch burstSetup = "map-patch"
	// setupPolicyFloor: policy mode's policies and bindings with the same params, whose expressions
	// do nothing of hyperbatch's: the CREATE mutation is map-patch's one operation, every validation
	// holds and every message is empty. What the apiserver's machinery for those policies costs.
	setupPolicyFloor burstSetup = "policy-floor"
	setupVAPNoop     burstSetup = "vap-noop"
)

// callsWebhook reports whether setup sends every Pod to one of the bench's own webhooks.
func (s burstSetup) callsWebhook() bool { return s == setupFloor || s == setupFloorPatch }

// patchesFloorAnnotation reports whether setup writes floorPatchAnnotation on every Pod (the
// one-operation patch of floor-patch's webhook, or of map-patch's and policy-floor's policies).
func (s burstSetup) patchesFloorAnnotation() bool {
	return s == setupFloorPatch || s == setupMAPPatch || s == setupPolicyFloor
}

// defaults reports whether Pods are defaulted under setup.
func (s burstSetup) defaults() bool {
	return s == setupHyperbatch || s == setupPolicy || s == setupPolicyMutate || s == setupPolicyMutateChecks
}

// burstResult is one burst round: its rate and the p99 of its creations' latency.
type burstResult struct {
	rps float64
	p99 time.Duration
}

// floorConfiguration is the floor set-up's one mutating entry: the bench namespace's Pod CREATEs go
// to the no-op webhook, served by the same server as hyperbatch's handlers (cc is theirs with the
// path replaced).
func floorConfiguration(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	return benchWebhookConfiguration(cc, "bench-floor", noopPath)
}

// floorPatchConfiguration is the floor-patch set-up's one mutating entry: the same, to the webhook
// that answers with a one-operation patch.
func floorPatchConfiguration(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	return benchWebhookConfiguration(cc, "bench-floor-patch", onePatchPath)
}

func benchWebhookConfiguration(cc admissionregistrationv1.WebhookClientConfig, name, path string) *admissionregistrationv1.MutatingWebhookConfiguration {
	cc = *cc.DeepCopy()
	u := w.URL + path
	cc.URL, cc.Service = &u, nil
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: strings.TrimPrefix(name, "bench-") + ".bench.hyperbatch.dev", ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: benchNS}},
			FailurePolicy:     &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
}

var (
	burstRuns     string
	burstFailures atomic.Int64 // failed creations and Pods defaulted contrary to the webhooks' presence
)

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func joinRates(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(out, ", ")
}

// burst creates burstPods Pods from `concurrency` workers and returns pods/s; it fails the benchmark
// when a creation fails, a Pod's defaulting does not match the set-up, or (floor) the no-op was not
// called once per Pod.
func burst(b *testing.B, c client.Client, prefix string, setup burstSetup) burstResult {
	hooks := setup.defaults()
	lat := make([]time.Duration, burstPods)
	calls0 := noopCalls.Load()
	var failures, wrong atomic.Int64
	var firstErr atomic.Value
	elapsed := parallel(burstPods, func() func(int) {
		return func(i int) {
			p := pod()
			p.Name = fmt.Sprintf("%s-%d", prefix, i)
			t := time.Now()
			err := c.Create(context.Background(), p)
			lat[i] = time.Since(t)
			if err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			if (p.Annotations["scheduling.volcano.sh/queue-name"] == "bench") != hooks || (p.Annotations[floorPatchAnnotation] == "1") != setup.patchesFloorAnnotation() {
				wrong.Add(1)
			}
		}
	})
	rps := burstPods / elapsed.Seconds()
	wantCalls := int64(0)
	if setup.callsWebhook() {
		wantCalls = burstPods
	}
	if calls := noopCalls.Load() - calls0; calls != wantCalls {
		wrong.Add(1)
		b.Errorf("pod burst %s (%s): the no-op webhook was called %d times, want %d", prefix, setup, calls, wantCalls)
	}
	burstFailures.Add(failures.Load() + wrong.Load())
	if failures.Load() > 0 || wrong.Load() > 0 {
		b.Errorf("pod burst %s (%s): %d failed, %d defaulted contrary to the set-up (first error: %v)", prefix, setup, failures.Load(), wrong.Load(), firstErr.Load())
	}
	slices.Sort(lat)
	return burstResult{rps: rps, p99: lat[burstPods*99/100]}
}

// useSetup installs (copies of) the configurations of setup and deletes those of the others, then
// waits until a probe Pod shows the apiserver follows: defaulted exactly under hyperbatch's, and
// passed to the no-op exactly under the floor's.
func useSetup(b *testing.B, c client.Client, setups map[burstSetup][]client.Object, setup burstSetup, tag string) {
	ctx := context.Background()
	// Set-ups share objects (policy's breakdown set-ups are some of its policies): one of the
	// chosen set-up's is never deleted.
	chosen := map[string]bool{}
	for _, obj := range setups[setup] {
		chosen[fmt.Sprintf("%T/%s", obj, obj.GetName())] = true
	}
	for s, objs := range setups {
		for _, obj := range objs {
			if s != setup && chosen[fmt.Sprintf("%T/%s", obj, obj.GetName())] {
				continue
			}
			o := obj.DeepCopyObject().(client.Object)
			var err error
			if s == setup {
				o.SetResourceVersion("")
				o.SetUID("")
				o.SetCreationTimestamp(metav1.Time{})
				o.SetManagedFields(nil)
				err = client.IgnoreAlreadyExists(c.Create(ctx, o))
			} else {
				err = client.IgnoreNotFound(c.Delete(ctx, o))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	n := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n++
		p := pod()
		p.Name = fmt.Sprintf("probe-%s-%d", tag, n)
		// The no-op VAP refuses this probe and the no-op MAP annotates it (noopProbeLabel).
		p.Labels = map[string]string{noopProbeLabel: "deny"}
		calls0 := noopCalls.Load()
		if err := c.Create(ctx, p); err != nil {
			// Refused by the no-op VAP: the set-up is loaded exactly when it is vap-noop's. Any other
			// error (a configuration the apiserver is still loading) polls again.
			return setup == setupVAPNoop && strings.Contains(err.Error(), "bench probe"), nil
		}
		called := noopCalls.Load() > calls0
		_ = c.Delete(ctx, p)
		return setup != setupVAPNoop && (p.Annotations["scheduling.volcano.sh/queue-name"] == "bench") == setup.defaults() &&
			called == setup.callsWebhook() && (p.Annotations[floorPatchAnnotation] == "1") == setup.patchesFloorAnnotation() && (p.Annotations[noopProbeLabel] == "map") == (setup == setupMAPNoop || setup == setupMAPNoopAC), nil
	})
	if err != nil {
		b.Fatalf("the apiserver did not follow the webhook configurations of set-up %s: %v", setup, err)
	}
}

// partialLatency is set when BenchmarkAdmissionLatency runs only some cases
// (HYPERBATCH_BENCH_CASES): its figures are printed, and webhook.txt is left as it is.
var partialLatency atomic.Bool

func writeResults() error {
	mu.Lock()
	defer mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "# hyperbatch webhook benchmark, %s, GOMAXPROCS=%d, concurrency %d, %d requests per round,\n"+
		"# median of %d interleaved rounds; each handler is compared with a no-op given the same request body\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), concurrency, requests, rounds)
	for _, name := range []string{"noop-pod", "pod", "noop-volcanojob", "volcanojob"} {
		s, ok := results[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&sb, "%-15s p50 %7.2f ms  p99 %7.2f ms  %8.0f req/s  failures %d", name,
			ms(s.p50), ms(s.p99), s.rps, s.failures)
		if noop, ok := results["noop-"+name]; ok {
			fmt.Fprintf(&sb, "  p99/noop-p99 %.2fx (target <= 1.50x)  req/s vs noop %.2fx", ms(s.p99)/ms(noop.p99), s.rps/noop.rps)
		}
		sb.WriteString("\n")
	}
	burstLine := ""
	if s, ok := results["burst"]; ok {
		n, f := results["burst-none"], results["burst-floor"]
		burstLine = fmt.Sprintf("burst           %d pods through kube-apiserver, in the order hyperbatch, floor, none, none, floor, hyperbatch: with hyperbatch's webhooks %.0f pods/s, "+
			"with one no-op mutating webhook (floor) %.0f pods/s, without any webhook %.0f pods/s; ratio hyperbatch/none %.2fx (goal >= 0.90x), floor/none %.2fx, hyperbatch/floor %.2fx; %s; failures %d\n",
			burstPods, s.rps, f.rps, n.rps, s.rps/n.rps, f.rps/n.rps, s.rps/f.rps, burstRuns, burstFailures.Load())
		sb.WriteString(burstLine)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Print(sb.String())
	if len(peerLines) > 0 || burstLine != "" {
		head := fmt.Sprintf("# %s BenchmarkAdmissionPeers / BenchmarkPodBurst, GOMAXPROCS=%d, %s, concurrency %d, %d mutate+validate pairs per round, median of %d alternating rounds\n"+
			"# make build && KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/webhook/ -run '^$' -bench 'AdmissionPeers|PodBurst' -benchtime=1x -timeout 40m\n",
			time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), concurrency, peerPairs, rounds)
		if err := framework.WriteResultSection("peers.txt", "admission", head+strings.Join(peerLines, "\n")+"\n"+burstLine); err != nil {
			return err
		}
	}
	if len(results) == 0 || partialLatency.Load() {
		return nil
	}
	path := filepath.Join(dir, "webhook.txt")
	if _, ok := results["pod"]; !ok && burstLine != "" {
		// Only the burst ran: keep the file's latency figures and replace its burst line.
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var keep []string
		for _, line := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
			if !strings.HasPrefix(line, "burst") {
				keep = append(keep, line)
			}
		}
		text := strings.Join(keep, "\n") + "\n" + strings.TrimSuffix(burstLine, "\n") + "  [separate run, " + time.Now().UTC().Format(time.RFC3339) + "]\n"
		return os.WriteFile(path, []byte(text), 0o644)
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runtimeRaw(b []byte) k8sruntime.RawExtension { return k8sruntime.RawExtension{Raw: b} }
