package lifecycle

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// installTrainJobCRD installs Kubeflow Trainer's CRDs (make crds gathers them from the pinned module)
// before the manager starts: its lifecycle controller serves TrainJobs only when their CRD exists.
func installTrainJobCRD(b *testing.B) {
	dir := filepath.Join(framework.RepoRoot(), "_output", "crds", "trainer")
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		b.Fatalf("installing Trainer's CRDs from %s (run make crds): %v", dir, err)
	}
}

// watchTrainJobDeletions records, per TrainJob name, the first time a deletionTimestamp is seen.
func watchTrainJobDeletions(b *testing.B, ns string) (map[string]time.Time, *sync.Mutex, func()) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	ca, err := crcache.New(cfg, crcache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := ca.GetInformer(context.Background(), defaults.NewTrainJob())
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]time.Time{}
	var mu sync.Mutex
	record := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetDeletionTimestamp() == nil {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, ok := out[u.GetName()]; !ok {
			out[u.GetName()] = now
		}
		mu.Unlock()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("benchmark informer did not sync")
	}
	return out, &mu, cancel
}

// BenchmarkTrainJobTTLDeletions is BenchmarkTTLDeletions for TrainJobs (Trainer v2.3.0's CRD; no
// Trainer controller runs: the benchmark writes each TrainJob's Complete condition, as the HyperJob
// benchmark writes Completed, so the due times are exact). LIFECYCLE_BENCH_TTL sets N.
func BenchmarkTrainJobTTLDeletions(b *testing.B) {
	n := envInt("LIFECYCLE_BENCH_TTL", 10000)
	spread := envInt("LIFECYCLE_BENCH_SPREAD", 60)
	installTrainJobCRD(b)
	c := benchClient(b)
	ctx := context.Background()
	ns := fmt.Sprintf("tj-ttl-bench-%d", time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	mgr := startManager(b)
	seen, mu, stop := watchTrainJobDeletions(b, ns)
	defer stop()
	cpuStart := mgr.cpuSeconds(b)
	setup := time.Now()
	ttlOf := func(i int) int { return 1 + i*spread/n }
	tjName := func(i int) string { return fmt.Sprintf("tj-%05d", i) }
	tjs := make([]*unstructured.Unstructured, n)
	framework.Parallel(b, 32, n, func(i int) error {
		tj := defaults.NewTrainJob()
		tj.SetNamespace(ns)
		tj.SetName(tjName(i))
		tj.SetAnnotations(map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: strconv.Itoa(ttlOf(i))})
		tj.Object["spec"] = map[string]any{"runtimeRef": map[string]any{"name": "torch-distributed"}}
		tjs[i] = tj
		return c.Create(ctx, tj)
	})
	created := time.Since(setup)
	finished := time.Now().Add(2*created + 10*time.Second).Truncate(time.Second).Add(time.Second)
	written := make([]time.Time, n)
	framework.Parallel(b, 32, n, func(i int) error {
		tjs[i].Object["status"] = map[string]any{"conditions": []any{map[string]any{
			"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "benchmark",
			"lastTransitionTime": finished.UTC().Format(time.RFC3339)}}}
		err := c.Status().Update(ctx, tjs[i])
		written[i] = time.Now()
		return err
	})
	setupTook := time.Since(setup)
	first := finished.Add(time.Second)
	if time.Now().After(first) {
		b.Logf("warning: setup (%s) ran past the first due time; early lags include setup", setupTook)
	}
	time.Sleep(time.Until(first))
	cpuWindow := mgr.cpuSeconds(b)
	deadline := first.Add(time.Duration(spread)*time.Second + 3*time.Minute)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(seen)
		mu.Unlock()
		if k >= n {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cpuEnd := mgr.cpuSeconds(b)
	mu.Lock()
	defer mu.Unlock()
	lags := make([]float64, 0, n)
	early, late, deleted := 0, 0, 0
	for i := 0; i < n; i++ {
		d := finished.Add(time.Duration(ttlOf(i)) * time.Second)
		t, ok := seen[tjName(i)]
		if !ok {
			continue
		}
		deleted++
		if written[i].After(d) {
			late++
			continue
		}
		l := t.Sub(d).Seconds()
		if l < 0 {
			early++
		}
		lags = append(lags, l)
	}
	sort.Float64s(lags)
	b.ReportMetric(float64(deleted), "deleted")
	b.ReportMetric(quantile(lags, 0.5), "s-lag-p50")
	b.ReportMetric(quantile(lags, 0.99), "s-lag-p99")
	b.ReportMetric(quantile(lags, 1), "s-lag-max")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(cpuEnd-cpuStart, "manager-cpu-s-total")
	line := fmt.Sprintf("TTL deletions: %d finished TrainJobs, TTLs expiring over %ds (setup %s): %d deleted, %d excluded (status written after due), %d early; lag p50 %.3fs p99 %.3fs max %.3fs; manager CPU %.2fs total (ingesting %d objects + deletions), %.2fs during the deletion window",
		n, spread, setupTook.Round(time.Second), deleted, late, early, quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1), cpuEnd-cpuStart, n, cpuEnd-cpuWindow)
	b.Log(line)
	appendResult(b, line)
	if deleted < n {
		b.Errorf("only %d of %d TrainJobs were deleted", deleted, n)
	}
}
