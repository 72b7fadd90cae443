// Package lifecycle benchmarks the lifecycle controller as it runs in production: the real
// bin/manager binary (--controllers=lifecycle) against a real kube-apiserver (envtest).
//
//	make build && KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/lifecycle/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// BenchmarkTTLDeletions: LIFECYCLE_BENCH_TTL (default 10000) finished HyperJobs whose TTLs expire
// spread over 60 s. The lag of each deletion is the time the benchmark's watch sees the HyperJob's
// deletionTimestamp minus its due time (terminal condition's lastTransitionTime + TTL, both exact
// whole seconds here). Reported: p50, p99 and max lag, and the manager's CPU seconds (utime+stime of
// its process, from /proc) over the whole run and over the deletion window.
//
// BenchmarkDeadlineAccuracy: LIFECYCLE_BENCH_DEADLINES (default 1000) running HyperJobs with
// deadlines spread over 30 s. The error of each is the time the watch sees the Failed condition minus
// the due time from the object's timestamps (creationTimestamp + deadline), and minus the due time
// from the moment the Create call returned (what the user sees: creationTimestamp has whole-second
// precision, so the rule can act up to 1 s before the true creation + deadline).
// BenchmarkJobSetDeadlineAccuracy is the same for running JobSets.
//
// Each benchmark appends a dated summary line to bench/results/lifecycle.txt unless
// LIFECYCLE_BENCH_NO_RESULTS is set.
package lifecycle

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietDiscard)
	os.Exit(framework.RunMain(m, &env))
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchClient(b *testing.B) client.WithWatch {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// manager is the bin/manager process.
type manager struct {
	cmd *exec.Cmd
	log *os.File
}

func startManager(b *testing.B) *manager {
	bin := filepath.Join(framework.RepoRoot(), "bin", "manager")
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("%s is missing: run 'make build' first: %v", bin, err)
	}
	dir := b.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kc); err != nil {
		b.Fatal(err)
	}
	logf, err := os.CreateTemp("", "lifecycle-bench-manager-*.log")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+kc, "--controllers=lifecycle", "--enable-webhooks=false",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level="+envStr("LIFECYCLE_BENCH_LOG_LEVEL", "info"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Logf("manager log: %s", logf.Name())
	m := &manager{cmd: cmd, log: logf}
	b.Cleanup(m.stop)
	return m
}

func (m *manager) stop() {
	if m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
	_ = m.log.Close()
}

// cpuSeconds is the process's utime+stime from /proc/<pid>/stat (clock ticks of 1/100 s).
func (m *manager) cpuSeconds(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("reading the manager's CPU time: %v", err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// watchFirst records, per object name, the first time seen(obj) holds for an object of proto's kind
// in ns, through an informer (which re-lists and re-watches if the apiserver closes its watch).
func watchFirst(b *testing.B, ns string, proto client.Object, seen func(client.Object) bool) (map[string]time.Time, *sync.Mutex, func()) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	ca, err := crcache.New(cfg, crcache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := ca.GetInformer(context.Background(), proto)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]time.Time{}
	var mu sync.Mutex
	record := func(obj any) {
		o, ok := obj.(client.Object)
		if !ok || !seen(o) {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, ok := out[o.GetName()]; !ok {
			out[o.GetName()] = now
		}
		mu.Unlock()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		b.Fatal("benchmark informer did not sync")
	}
	return out, &mu, cancel
}

func deleting(o client.Object) bool { return o.GetDeletionTimestamp() != nil }

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// ttlKind is what the TTL benchmark needs of one kind of workload.
type ttlKind struct {
	plural string        // in the result line: "HyperJobs"
	prefix string        // of the namespace and the object names
	proto  client.Object // the informer's kind
	// build returns object i with its TTL annotation.
	build func(ns, name string, ttl int) client.Object
	// finish writes the terminal condition, with lastTransitionTime at, into the object build made.
	finish func(obj client.Object, at time.Time)
}

func BenchmarkTTLDeletions(b *testing.B) {
	runTTLDeletions(b, ttlKind{plural: "HyperJobs", prefix: "hj", proto: &trainingv1alpha1.HyperJob{},
		build: func(ns, name string, ttl int) client.Object {
			return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: strconv.Itoa(ttl)}}}
		},
		finish: func(obj client.Object, at time.Time) {
			hj := obj.(*trainingv1alpha1.HyperJob)
			apimeta.SetStatusCondition(&hj.Status.Conditions, metav1.Condition{Type: "Completed", Status: metav1.ConditionTrue,
				Reason: "ChildJobsCompleted", Message: "benchmark", LastTransitionTime: metav1.NewTime(at)})
		}})
}

// runTTLDeletions: LIFECYCLE_BENCH_TTL finished objects of kind k whose TTLs fall due spread evenly
// over LIFECYCLE_BENCH_SPREAD seconds; the lag of each is the time the benchmark's informer sees its
// deletionTimestamp minus its due time.
func runTTLDeletions(b *testing.B, k ttlKind) {
	n := envInt("LIFECYCLE_BENCH_TTL", 10000)
	spread := envInt("LIFECYCLE_BENCH_SPREAD", 60)
	c := benchClient(b)
	ctx := context.Background()
	ns := fmt.Sprintf("%s-ttl-bench-%d", k.prefix, time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	mgr := startManager(b)

	// Phase 1 creates the objects with their TTLs (1..spread s); phase 2 writes their terminal
	// condition, all with the same lastTransitionTime `finished`, a whole second chosen after phase 1
	// so that phase 2 (about as long as phase 1) ends before the first TTL expires.
	seen, mu, stop := watchFirst(b, ns, k.proto, deleting)
	defer stop()
	cpuStart := mgr.cpuSeconds(b)
	setup := time.Now()
	ttlOf := func(i int) int { return 1 + i*spread/n }
	nameOf := func(i int) string { return fmt.Sprintf("%s-%05d", k.prefix, i) }
	objs := make([]client.Object, n)
	framework.Parallel(b, 32, n, func(i int) error {
		objs[i] = k.build(ns, nameOf(i), ttlOf(i))
		return c.Create(ctx, objs[i])
	})
	created := time.Since(setup)
	finished := time.Now().Add(2*created + 10*time.Second).Truncate(time.Second).Add(time.Second)
	written := make([]time.Time, n)
	framework.Parallel(b, 32, n, func(i int) error {
		k.finish(objs[i], finished)
		err := c.Status().Update(ctx, objs[i])
		written[i] = time.Now()
		return err
	})
	setupTook := time.Since(setup)
	first := finished.Add(time.Second)
	if time.Now().After(first) {
		b.Logf("warning: setup (%s) ran past the first due time; early lags include setup", setupTook)
	}
	// Wait for the first due time, then measure CPU over the deletion window.
	time.Sleep(time.Until(first))
	cpuWindow := mgr.cpuSeconds(b)
	deadline := first.Add(time.Duration(spread)*time.Second + 3*time.Minute)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got >= n {
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
		t, ok := seen[nameOf(i)]
		if !ok {
			continue
		}
		deleted++
		if written[i].After(d) {
			late++ // finished only after its due time: its lag would measure the setup
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
	b.ReportMetric(float64(late), "excluded-finished-after-due")
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(quantile(lags, 0.5), "s-lag-p50")
	b.ReportMetric(quantile(lags, 0.99), "s-lag-p99")
	b.ReportMetric(quantile(lags, 1), "s-lag-max")
	b.ReportMetric(float64(early), "early")
	b.ReportMetric(cpuEnd-cpuStart, "manager-cpu-s-total")
	b.ReportMetric(cpuEnd-cpuWindow, "manager-cpu-s-deletion-window")
	line := fmt.Sprintf("TTL deletions: %d finished %s, TTLs expiring over %ds (setup %s): %d deleted, %d excluded (status written after due), %d early; lag p50 %.3fs p99 %.3fs max %.3fs; manager CPU %.2fs total (ingesting %d objects + deletions), %.2fs during the deletion window",
		n, k.plural, spread, setupTook.Round(time.Second), deleted, late, early, quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1), cpuEnd-cpuStart, n, cpuEnd-cpuWindow)
	b.Log(line)
	appendResult(b, line)
	if deleted < n {
		b.Errorf("only %d of %d %s were deleted", deleted, n, k.plural)
	}
}

// deadlineKind is what the deadline benchmark needs of one kind of workload.
type deadlineKind struct {
	plural string        // in the result line: "HyperJobs"
	prefix string        // of the namespace and the object names
	proto  client.Object // the informer's kind
	// build returns object name with its active-deadline annotation of seconds, running.
	build func(ns, name string, seconds int) client.Object
	// failed says the object carries the Failed condition with reason DeadlineExceeded.
	failed func(client.Object) bool
}

func failedForDeadline(conds []metav1.Condition) bool {
	cond := apimeta.FindStatusCondition(conds, "Failed")
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "DeadlineExceeded"
}

func BenchmarkDeadlineAccuracy(b *testing.B) {
	runDeadlineAccuracy(b, deadlineKind{plural: "HyperJobs", prefix: "hj", proto: &trainingv1alpha1.HyperJob{},
		build: func(ns, name string, seconds int) client.Object {
			return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: strconv.Itoa(seconds)}}}
		},
		failed: func(o client.Object) bool {
			hj, ok := o.(*trainingv1alpha1.HyperJob)
			return ok && failedForDeadline(hj.Status.Conditions)
		}})
}

// BenchmarkJobSetDeadlineAccuracy is BenchmarkDeadlineAccuracy for JobSets (no JobSet controller
// runs: a JobSet that is not suspended runs from its creation, and the lifecycle controller writes
// its Failed condition).
func BenchmarkJobSetDeadlineAccuracy(b *testing.B) {
	runDeadlineAccuracy(b, deadlineKind{plural: "JobSets", prefix: "js", proto: &jobsetv1alpha2.JobSet{},
		build: func(ns, name string, seconds int) client.Object {
			return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: strconv.Itoa(seconds)}},
				Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 1,
					Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "w", Image: "registry.k8s.io/pause:3.10"}}}}}}}}}}
		},
		failed: func(o client.Object) bool {
			js, ok := o.(*jobsetv1alpha2.JobSet)
			return ok && failedForDeadline(js.Status.Conditions)
		}})
}

// runDeadlineAccuracy: LIFECYCLE_BENCH_DEADLINES running objects of kind k with deadlines spread
// over 30 s; the error of each is the time the benchmark's informer sees its Failed/DeadlineExceeded
// condition minus its due time.
func runDeadlineAccuracy(b *testing.B, k deadlineKind) {
	n := envInt("LIFECYCLE_BENCH_DEADLINES", 1000)
	const spread, base = 30, 10
	c := benchClient(b)
	ctx := context.Background()
	ns := fmt.Sprintf("%s-deadline-bench-%d", k.prefix, time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	mgr := startManager(b)
	seen, mu, stop := watchFirst(b, ns, k.proto, k.failed)
	defer stop()
	cpuStart := mgr.cpuSeconds(b)
	type created struct {
		objectDue, callDue time.Time
	}
	var cmu sync.Mutex
	dues := make(map[string]created, n)
	framework.Parallel(b, 32, n, func(i int) error {
		d := time.Duration(base+i*spread/n) * time.Second
		obj := k.build(ns, fmt.Sprintf("%s-%05d", k.prefix, i), int(d.Seconds()))
		before := time.Now()
		if err := c.Create(ctx, obj); err != nil {
			return err
		}
		cmu.Lock()
		dues[obj.GetName()] = created{objectDue: obj.GetCreationTimestamp().Add(d), callDue: before.Add(d)}
		cmu.Unlock()
		return nil
	})
	end := time.Now().Add((base+spread)*time.Second + 2*time.Minute)
	for time.Now().Before(end) {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cpu := mgr.cpuSeconds(b) - cpuStart
	mu.Lock()
	defer mu.Unlock()
	var objErr, callErr []float64
	for nm, d := range dues {
		t, ok := seen[nm]
		if !ok {
			continue
		}
		objErr = append(objErr, t.Sub(d.objectDue).Seconds())
		callErr = append(callErr, t.Sub(d.callDue).Seconds())
	}
	sort.Float64s(objErr)
	sort.Float64s(callErr)
	b.ReportMetric(float64(len(objErr)), "failed")
	b.ReportMetric(quantile(objErr, 0), "s-err-min")
	b.ReportMetric(quantile(objErr, 0.5), "s-err-p50")
	b.ReportMetric(quantile(objErr, 0.99), "s-err-p99")
	b.ReportMetric(quantile(objErr, 1), "s-err-max")
	b.ReportMetric(quantile(callErr, 0), "s-err-vs-create-call-min")
	b.ReportMetric(quantile(callErr, 1), "s-err-vs-create-call-max")
	b.ReportMetric(cpu, "manager-cpu-s")
	line := fmt.Sprintf("deadline accuracy: %d %s, deadlines %d..%ds: %d failed; error vs creationTimestamp+deadline min %.3fs p50 %.3fs p99 %.3fs max %.3fs; vs Create call+deadline min %.3fs max %.3fs; manager CPU %.2fs",
		n, k.plural, base, base+spread, len(objErr), quantile(objErr, 0), quantile(objErr, 0.5), quantile(objErr, 0.99), quantile(objErr, 1),
		quantile(callErr, 0), quantile(callErr, 1), cpu)
	b.Log(line)
	appendResult(b, line)
	if len(objErr) < n {
		b.Errorf("only %d of %d %s failed for their deadline", len(objErr), n, k.plural)
	}
}

func envStr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// appendResult appends a dated line to bench/results/lifecycle.txt.
func appendResult(b *testing.B, line string) {
	if os.Getenv("LIFECYCLE_BENCH_NO_RESULTS") != "" {
		return
	}
	p := filepath.Join(framework.RepoRoot(), "bench", "results", "lifecycle.txt")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Errorf("appending to %s: %v", p, err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := fmt.Fprintf(f, "%s  %s\n", time.Now().UTC().Format(time.RFC3339), line); err != nil {
		b.Errorf("appending to %s: %v", p, err)
	}
}
