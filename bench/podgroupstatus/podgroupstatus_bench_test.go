// Package podgroupstatus benchmarks the PodGroup lifecycle controller against a real kube-apiserver
// (envtest): 1,000 PodGroups of hyperbatch-scheduler (owned by a Volcano Job, as Volcano's job
// controller creates them) are created at once; the benchmark reports the time from each creation
// to the PodGroup being stored Inqueue (p50, p99, max, as seen by a watch), then gives every gang one
// bound pod (Running, then Succeeded) and reports the controller's PodGroup writes per gang for
// each stage, counted at its HTTP transport.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/podgroupstatus/ -run '^$' -bench . -benchtime 1x -timeout 20m
//
// PGSTATUS_BENCH_N changes the number of PodGroups (default 1000).
package podgroupstatus

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietDiscard)
	os.Exit(framework.RunMain(m, &env))
}

func gangs() int {
	if n, err := strconv.Atoi(os.Getenv("PGSTATUS_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// writeCounter counts the controller's mutating PodGroup requests at its transport.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/podgroups") {
			w.n.Add(1)
		}
		return next.RoundTrip(req)
	})
}

var seq atomic.Int32

// BenchmarkEnqueueAndStatus: queue "none" has no capability (each decision is local); queue
// "capability" has one that all gangs fit in, so every decision lists and orders the queue's gangs.
func BenchmarkEnqueueAndStatus(b *testing.B) {
	for _, tc := range []struct {
		name       string
		capability corev1.ResourceList
	}{
		{"queue=no-capability", nil},
		{"queue=capability", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1000000")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runOnce(b, tc.capability)
			}
		})
	}
}

func runOnce(b *testing.B, capability corev1.ResourceList) {
	n := gangs()
	ctx := context.Background()
	id := seq.Add(1)
	ns, qname := fmt.Sprintf("bench-%d", id), fmt.Sprintf("bench-q-%d", id)

	// The controller, as cmd/manager runs it (no client-side rate limit), its writes counted.
	w := &writeCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Wrap(w.RoundTrip)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	must(b, err)
	r, err := podgroupstatus.NewReconciler(mgr, podgroupstatus.Options{})
	must(b, err)
	must(b, r.SetupWithManager(mgr))
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	ccfg := rest.CopyConfig(env.Config)
	ccfg.QPS, ccfg.Burst = -1, 0
	c, err := client.NewWithWatch(ccfg, client.Options{Scheme: scheme.New()})
	must(b, err)
	cs, err := kubernetes.NewForConfig(ccfg)
	must(b, err)
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	must(b, c.Create(ctx, builders.MakeQueue(qname).Capability(capability).Obj()))
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
		Spec: batchv1alpha1.JobSpec{SchedulerName: podgroupstatus.DefaultSchedulerName, MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{
			Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}}}
	must(b, c.Create(ctx, job))
	owner := metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))

	// Wait for the controller's caches before the clock starts (its first reconcile of the Queue).
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("controller cache did not sync")
	}

	// A watch records when each PodGroup is first stored with each phase.
	wi, err := c.Watch(ctx, &schedulingv1beta1.PodGroupList{}, client.InNamespace(ns))
	must(b, err)
	defer wi.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	seen := map[schedulingv1beta1.PodGroupPhase]map[string]time.Time{}
	counts := map[string]int32{}
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			pg, ok := ev.Object.(*schedulingv1beta1.PodGroup)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			m := seen[pg.Status.Phase]
			if m == nil {
				m = map[string]time.Time{}
				seen[pg.Status.Phase] = m
			}
			if _, ok := m[pg.Name]; !ok {
				m[pg.Name] = now
			}
			counts[pg.Name] = pg.Status.Running*1000 + pg.Status.Succeeded
			mu.Unlock()
		}
	}()
	count := func(p schedulingv1beta1.PodGroupPhase) int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[p])
	}
	waitAll := func(what string, cond func() bool) time.Duration {
		start := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		return time.Since(start)
	}

	b.ResetTimer()
	start := time.Now()
	parallel(n, 16, func(i int) {
		name := fmt.Sprintf("pg-%04d", i)
		pg := builders.MakePodGroup(ns, name).Owner(owner).Queue(qname).MinGPUs(1).Obj()
		t0 := time.Now()
		must(b, c.Create(ctx, pg))
		mu.Lock()
		created[name] = t0
		mu.Unlock()
	})
	createDur := time.Since(start)
	waitAll("all Inqueue", func() bool { return count(schedulingv1beta1.PodGroupInqueue) >= n })
	enqueueAll := time.Since(start)
	b.StopTimer()
	writesEnqueue := w.n.Load()

	mu.Lock()
	lat := make([]float64, 0, n)
	for name, t0 := range created {
		lat = append(lat, seen[schedulingv1beta1.PodGroupInqueue][name].Sub(t0).Seconds()*1000)
	}
	mu.Unlock()
	sort.Float64s(lat)

	// Status: one bound pod per gang, Running, then Succeeded (the benchmark plays the kubelet).
	parallel(n, 16, func(i int) {
		name := fmt.Sprintf("pg-%04d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{schedulingv1beta1.KubeGroupNameAnnotationKey: name}},
			Spec: corev1.PodSpec{SchedulerName: podgroupstatus.DefaultSchedulerName, NodeName: "bench-node",
				Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		must(b, err)
		created.Status.Phase = corev1.PodRunning
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		must(b, err)
	})
	runningAll := waitAll("all Running with running=1", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(seen[schedulingv1beta1.PodGroupRunning]) < n {
			return false
		}
		for _, v := range counts {
			if v != 1000 {
				return false
			}
		}
		return true
	})
	writesRunning := w.n.Load() - writesEnqueue
	parallel(n, 16, func(i int) {
		name := fmt.Sprintf("pg-%04d", i)
		must(b, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodSucceeded
			_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}))
	})
	completedAll := waitAll("all Completed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(seen[schedulingv1beta1.PodGroupCompleted]) < n {
			return false
		}
		for _, v := range counts {
			if v != 1 {
				return false
			}
		}
		return true
	})
	writesCompleted := w.n.Load() - writesEnqueue - writesRunning

	fn := float64(n)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(pct(lat, 50), "ms/enqueue-p50")
	b.ReportMetric(pct(lat, 99), "ms/enqueue-p99")
	b.ReportMetric(lat[len(lat)-1], "ms/enqueue-max")
	b.ReportMetric(float64(writesEnqueue)/fn, "writes/gang-enqueue")
	b.ReportMetric(float64(writesRunning)/fn, "writes/gang-running")
	b.ReportMetric(float64(writesCompleted)/fn, "writes/gang-completed")
	b.Logf("%d PodGroups created in %v (16 parallel creators); all Inqueue %v after the first create; all Running %v after the pods were Running; all Completed %v after they Succeeded; PodGroup writes %d/%d/%d",
		n, createDur.Round(time.Millisecond), enqueueAll.Round(time.Millisecond), runningAll.Round(time.Millisecond), completedAll.Round(time.Millisecond),
		writesEnqueue, writesRunning, writesCompleted)
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Helper()
		b.Fatal(err)
	}
}
