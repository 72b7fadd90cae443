// Package hyperjob benchmarks the HyperJob controller against a real kube-apiserver (envtest): the
// time one HyperJob with 1,000 replicas takes to converge (1,000 Volcano Jobs, 1,000
// PropagationPolicies, status written) at a given client QPS, and the API writes a steady-state
// re-reconcile makes (target 0).
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/hyperjob/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// HYPERJOB_BENCH_SLOW=1 adds client-go's built-in default (5 QPS, burst 10), which takes minutes.
package hyperjob

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

const replicas = 1000

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietDiscard)
	os.Exit(framework.RunMain(m, &env))
}

// writeCounter counts the controller's API writes (through its client) and every HTTP request the
// manager makes, by verb.
type writeCounter struct {
	writes atomic.Int64
	mu     sync.Mutex
	http   map[string]int64
}

func (w *writeCounter) snapshot() (int64, map[string]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]int64, len(w.http))
	for k, v := range w.http {
		m[k] = v
	}
	return w.writes.Load(), m
}

func (w *writeCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := req.Method
		if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		kind := "other"
		switch {
		case strings.Contains(req.URL.Path, "/events"):
			kind = "events"
		case strings.Contains(req.URL.Path, "/hyperjobs"):
			kind = "hyperjobs"
		case strings.Contains(req.URL.Path, "/jobs"):
			kind = "jobs"
		case strings.Contains(req.URL.Path, "/propagationpolicies"):
			kind = "propagationpolicies"
		}
		w.mu.Lock()
		w.http[verb+" "+kind]++
		w.mu.Unlock()
		return next.RoundTrip(req)
	})
}

// countingClient wraps the manager's client and counts every write.
type countingClient struct {
	client.Client
	n *atomic.Int64
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}
func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}
func (c countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, p, opts...)
}
func (c countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}
func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}
func (c countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}
func (c countingClient) Status() client.SubResourceWriter {
	return countingSubResource{c.Client.Status(), c.n}
}
func (c countingClient) SubResource(sub string) client.SubResourceClient {
	return countingSubResourceClient{c.Client.SubResource(sub), c.n}
}

type countingSubResource struct {
	client.SubResourceWriter
	n *atomic.Int64
}

func (c countingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Create(ctx, obj, sub, opts...)
}
func (c countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}
func (c countingSubResource) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

type countingSubResourceClient struct {
	client.SubResourceClient
	n *atomic.Int64
}

func (c countingSubResourceClient) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Create(ctx, obj, sub, opts...)
}
func (c countingSubResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Update(ctx, obj, opts...)
}
func (c countingSubResourceClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceClient.Patch(ctx, obj, p, opts...)
}

type qpsCase struct {
	name       string
	qps        float32
	burst      int
	slow       bool
	annotation string
}

// BenchmarkConverge1000 creates one HyperJob with replicas 1000 and measures the time until its
// 1,000 Volcano Jobs and 1,000 PropagationPolicies exist and its status says splitCount 1000 for the
// current generation; then it counts the API writes of a steady-state re-reconcile, once called
// directly and once through the controller after a metadata-only change of the HyperJob.
func BenchmarkConverge1000(b *testing.B) {
	cases := []qpsCase{
		// cmd/manager loads its config with ctrl.GetConfig(), which turns an unset QPS into -1:
		// no client-side rate limit, relying on the apiserver's priority and fairness.
		{name: "qps=unlimited(manager-default)", qps: -1, annotation: "rest.Config.QPS=-1 as set by ctrl.GetConfig() when the kubeconfig sets none"},
		// kube-controller-manager's defaults, a common explicit choice for controllers.
		{name: "qps=20,burst=30", qps: 20, burst: 30, annotation: "kube-controller-manager's --kube-api-qps/--kube-api-burst defaults"},
		// client-go's built-in default when rest.Config.QPS is 0 and nothing overrides it.
		{name: "qps=5,burst=10(client-go-default)", qps: 5, burst: 10, slow: true, annotation: "client-go's DefaultQPS/DefaultBurst"},
	}
	for i, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if tc.slow && os.Getenv("HYPERJOB_BENCH_SLOW") == "" {
				b.Skip("set HYPERJOB_BENCH_SLOW=1 to run (minutes)")
			}
			for n := 0; n < b.N; n++ {
				runConverge(b, tc, fmt.Sprintf("bench-%d-%d", i, n))
			}
		})
	}
}

// startManager creates the namespace and runs a manager with the HyperJob controller whose cache
// sees only it, with the client QPS and burst given, counting its writes and HTTP requests. The
// manager stops at the end of the benchmark.
func startManager(b *testing.B, ns string, qps float32, burst int) (*hyperjob.Reconciler, *writeCounter) {
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	counter := &writeCounter{http: map[string]int64{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.Wrap(counter.RoundTrip)
	var r *hyperjob.Reconciler
	mgr := framework.StartTestManagerFor(b, cfg, ns, func(o *ctrl.Options) {
		o.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return countingClient{Client: c, n: &counter.writes}, nil
		}
	}, func(mgr manager.Manager) error {
		r = hyperjob.NewReconciler(mgr)
		return r.SetupWithManager(mgr)
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}
	return r, counter
}

func runConverge(b *testing.B, tc qpsCase, ns string) {
	ctx := context.Background()
	r, counter := startManager(b, ns, tc.qps, tc.burst)

	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{
			Name: "w", Replicas: replicas, ClusterNames: []string{"member-1", "member-2"},
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 2, Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 2,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainer:1"}}}}}}},
		}}}}
	b.ResetTimer()
	start := time.Now()
	if err := env.Client.Create(ctx, hj); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 30*time.Minute, func(ctx context.Context) (bool, error) {
		var cur trainingv1alpha1.HyperJob
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
			return false, err
		}
		if cur.Status.SplitCount == nil || *cur.Status.SplitCount != replicas || cur.Status.ObservedGeneration != cur.Generation ||
			len(cur.Status.ReplicatedJobsStatus) != 1 || len(cur.Status.ReplicatedJobsStatus[0].JobStates) != replicas {
			return false, nil
		}
		jobs, pps, err := count(ctx, ns)
		return err == nil && jobs == replicas && pps == replicas, err
	})
	elapsed := time.Since(start)
	b.StopTimer()
	convergeWrites, convergeHTTP := counter.snapshot()

	// Quiet: wait until the controller has made no write for 2s.
	last := int64(-1)
	waitUntil(b, 2*time.Minute, func(ctx context.Context) (bool, error) {
		w, _ := counter.snapshot()
		if w == last {
			return true, nil
		}
		last = w
		time.Sleep(2 * time.Second)
		return false, nil
	})

	// Steady state, direct: one Reconcile call on the converged HyperJob.
	before, _ := counter.snapshot()
	reconcileStart := time.Now()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hj)}); err != nil {
		b.Fatal(err)
	}
	reconcileTime := time.Since(reconcileStart)
	after, _ := counter.snapshot()
	directWrites := after - before

	// Steady state, through the controller: a metadata-only change triggers a reconcile.
	before, beforeHTTP := counter.snapshot()
	var cur trainingv1alpha1.HyperJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["bench.hyperbatch.dev/poke"] = "1"
	if err := env.Client.Patch(ctx, &cur, patch); err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	after, afterHTTP := counter.snapshot()
	pokeWrites := after - before
	var pokeHTTPWrites int64
	for k, v := range afterHTTP {
		if !strings.HasPrefix(k, "GET ") && !strings.HasPrefix(k, "WATCH ") {
			pokeHTTPWrites += v - beforeHTTP[k]
		}
	}

	b.ReportMetric(elapsed.Seconds(), "s/converge")
	b.ReportMetric(float64(tc.qps), "client-qps")
	b.ReportMetric(float64(convergeWrites), "writes/converge")
	b.ReportMetric(float64(directWrites), "writes/steady-reconcile")
	b.ReportMetric(float64(pokeWrites), "writes/steady-poke")
	b.ReportMetric(float64(reconcileTime.Microseconds())/1000, "ms/steady-reconcile")
	b.Logf("%s (%s, burst %d): converged in %s with %d controller writes; HTTP requests by verb and resource during convergence: %v",
		tc.name, tc.annotation, tc.burst, elapsed.Round(time.Millisecond), convergeWrites, convergeHTTP)
	b.Logf("steady state: %d writes from a direct Reconcile (%s), %d controller writes and %d non-GET HTTP requests after a metadata-only change",
		directWrites, reconcileTime.Round(time.Microsecond), pokeWrites, pokeHTTPWrites)
}

func count(ctx context.Context, ns string) (int, int, error) {
	jl := &metav1.PartialObjectMetadataList{}
	jl.SetGroupVersionKind(batchv1alpha1.SchemeGroupVersion.WithKind("JobList"))
	if err := env.Client.List(ctx, jl, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	pl := &metav1.PartialObjectMetadataList{}
	pl.SetGroupVersionKind(policyv1alpha1.SchemeGroupVersion.WithKind("PropagationPolicyList"))
	if err := env.Client.List(ctx, pl, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	return len(jl.Items), len(pl.Items), nil
}

func waitUntil(b *testing.B, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		b.Fatalf("timed out: %v", err)
	}
}
