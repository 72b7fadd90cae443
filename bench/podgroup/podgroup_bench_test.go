// Package podgroup benchmarks the JobSet PodGroup controller against a real kube-apiserver (envtest),
// the controller running in the benchmark process with its client's writes counted at the transport.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/podgroup/ -run '^$' -bench . -benchtime 1x -timeout 20m
//
// BenchmarkJobSetsToPodGroups: PODGROUP_BENCH_JOBSETS (default 1000) gang JobSets (4 Jobs × 8 pods)
// are created; reported is the time until every one has its PodGroup with minMember 32 and the right
// minResources (target < 30 s). Then a LimitRange is created in the namespace, which makes the
// controller recompute every JobSet's PodGroup (its containers set their requests, so nothing
// changes); once the controller has finished at least that many more reconciles, the PodGroup writes
// made by the resync are reported (target 0).
//
// The result line is appended to bench/results/podgroup.txt unless PODGROUP_BENCH_NO_RESULTS is set.
package podgroup

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietDiscard)
	os.Exit(framework.RunMain(m, &env))
}

func reconciles(b *testing.B) float64 {
	v, err := framework.ReconcileTotal("podgroup")
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func BenchmarkJobSetsToPodGroups(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PODGROUP_BENCH_JOBSETS")); err == nil && v > 0 {
		n = v
	}
	var pgWrites atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return framework.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/podgroups") {
				pgWrites.Add(1)
			}
			return next.RoundTrip(r)
		})
	})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := podgroup.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()

	ccfg := rest.CopyConfig(env.Config)
	ccfg.QPS, ccfg.Burst = 5000, 10000
	c, err := client.New(ccfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	ns := "bench-pg"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	spec := corev1.PodSpec{SchedulerName: podgroup.HyperbatchSchedulerName, RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("js-%04d", i)},
				Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 4,
					Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](8), Completions: ptr.To[int32](8),
						Template: corev1.PodTemplateSpec{Spec: spec}}}}}}}
			if err := c.Create(ctx, js); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
	correct := func() int {
		var list schedulingv1beta1.PodGroupList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ok := 0
		for _, pg := range list.Items {
			if pg.Spec.MinMember == 32 && pg.Spec.MinResources != nil && (*pg.Spec.MinResources).Cpu().Cmp(resource.MustParse("32")) == 0 {
				ok++
			}
		}
		return ok
	}
	deadline := time.Now().Add(5 * time.Minute)
	for correct() < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d PodGroups correct after 5m", correct(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	// Steady state: wait for the PodGroups' own watch events to be reconciled, then resync all.
	settle := func() {
		for {
			r0 := reconciles(b)
			time.Sleep(500 * time.Millisecond)
			if reconciles(b) == r0 {
				return
			}
		}
	}
	settle()
	writesBefore := pgWrites.Load()
	r0 := reconciles(b)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "resync"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}
	if err := c.Create(ctx, lr); err != nil {
		b.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Minute)
	for reconciles(b) < r0+float64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("resync did not reconcile %d JobSets", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resyncWrites := pgWrites.Load() - writesBefore
	b.ReportMetric(elapsed.Seconds(), "s-to-all-podgroups")
	b.ReportMetric(float64(resyncWrites), "resync-writes")
	line := fmt.Sprintf("%s jobsets=%d all-podgroups-correct=%.2fs (target <30s) resync-reconciles>=%d resync-podgroup-writes=%d (target 0)\n",
		time.Now().UTC().Format(time.RFC3339), n, elapsed.Seconds(), n, resyncWrites)
	fmt.Print(line)
	if resyncWrites != 0 {
		b.Errorf("steady-state resync wrote %d times", resyncWrites)
	}
	if os.Getenv("PODGROUP_BENCH_NO_RESULTS") == "" {
		f, err := os.OpenFile(filepath.Join(framework.RepoRoot(), "bench", "results", "podgroup.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString("# KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/podgroup/ -run '^$' -bench . -benchtime 1x\n" + line)
			_ = f.Close()
		}
	}
}
