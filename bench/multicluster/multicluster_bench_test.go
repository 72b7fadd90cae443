// Package multicluster benchmarks HyperJobs across member clusters on a real Karmada v1.16 plane
// with two real members (test/integration/framework/federation): the time from creating the
// HyperJobs until every child runs in its member, split between hyperbatch, Karmada and the
// members, and the CPU each side spends. Both cases use splitPolicy mode auto (children of one
// pod × 1 GPU, no tier limit, maxDomains 2), so the decision is part of what is measured.
//
//	flock /tmp/hyperbatch-bench.lock go test ./bench/multicluster/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// MC_BENCH_HYPERJOBS (100), MC_BENCH_CHILDREN (10) and MC_BENCH_LARGE (1000) shrink the cases.
package multicluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/federation"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

var fed *federation.Federation

// Each member: 12 kwok nodes of 48 GPUs (576 GPUs, 1,320 pods), so 1,000 one-GPU children need both.
func memberNodes(prefix string) []membercluster.Node {
	out := make([]membercluster.Node, 12)
	for i := range out {
		out[i] = membercluster.Node{Name: fmt.Sprintf("%s-gpu-%02d", prefix, i), GPUs: 48}
	}
	return out
}

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietDiscard)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run() // no benchmark asked for: the tests here need no plane
	}
	dir, err := os.MkdirTemp("", "hyperbatch-bench-multicluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fed, err = federation.Start(ctx, federation.Options{Dir: dir, Members: map[string][]membercluster.Node{
		"member1": memberNodes("m1"), "member2": memberNodes("m2")}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "federation did not start: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "multicluster bench: plane + 2 members joined in %s\n", fed.Joined.Round(100*time.Millisecond))
	// Interrupted (Ctrl-C, timeout(1), a kill by PID): stop every process of the plane and the members
	// first. They run in their own process groups and hold the bench lock's inherited descriptor, so
	// leaving them would hold the lock for every other benchmark.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "multicluster bench: %v: stopping the plane and the members\n", s)
		_ = fed.Stop()
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}()
	code := m.Run()
	if err := fed.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping: %v\n", err)
	}
	return code
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkOneLargeHyperJob: one HyperJob of MC_BENCH_LARGE children.
func BenchmarkOneLargeHyperJob(b *testing.B) {
	c := envInt("MC_BENCH_LARGE", 1000)
	for i := 0; i < b.N; i++ {
		runCase(b, fmt.Sprintf("large-%d", i), 1, c)
	}
}

// BenchmarkManyHyperJobs: MC_BENCH_HYPERJOBS HyperJobs of MC_BENCH_CHILDREN children, created at once.
func BenchmarkManyHyperJobs(b *testing.B) {
	n, c := envInt("MC_BENCH_HYPERJOBS", 100), envInt("MC_BENCH_CHILDREN", 10)
	for i := 0; i < b.N; i++ {
		runCase(b, fmt.Sprintf("many-%d", i), n, c)
	}
}

// milestones of one child, in arrival order at this process.
type child struct {
	hj                                           string
	created, scheduled, released, inMember, runs time.Time
	cluster                                      string
}

type tracker struct {
	mu        sync.Mutex
	children  map[string]*child
	running   int
	rewatches int
}

func (tr *tracker) get(name string) *child {
	c := tr.children[name]
	if c == nil {
		c = &child{}
		tr.children[name] = c
	}
	return c
}

func set(t *time.Time, at time.Time) {
	if t.IsZero() {
		*t = at
	}
}

func (tr *tracker) watch(ctx context.Context, b *testing.B, cfg *rest.Config, ns string, list client.ObjectList, member string) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	open := func() (watch.Interface, error) {
		return c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns))
	}
	w, err := open()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		// A watch the loaded apiserver closes is opened again: its first events are the objects as
		// they are then, so a milestone missed meanwhile is recorded late, never lost (rewatches
		// counts how often).
		for {
			for e := range w.ResultChan() {
				if e.Type == watch.Error || e.Type == watch.Deleted {
					continue
				}
				tr.record(e.Object, member, time.Now())
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			tr.mu.Lock()
			tr.rewatches++
			tr.mu.Unlock()
			for {
				if w, err = open(); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second): // the apiserver refused a new watch: try again
				}
			}
		}
	}()
}

// progress counts the children that reached each milestone so far.
func (tr *tracker) progress() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var created, scheduled, released, in, runs int
	for _, c := range tr.children {
		for _, m := range []struct {
			t *time.Time
			n *int
		}{{&c.created, &created}, {&c.scheduled, &scheduled}, {&c.released, &released}, {&c.inMember, &in}, {&c.runs, &runs}} {
			if !m.t.IsZero() {
				*m.n++
			}
		}
	}
	return fmt.Sprintf("children on the plane %d, bindings scheduled %d, policies released %d, in a member %d, running %d (watches reopened %d)",
		created, scheduled, released, in, runs, tr.rewatches)
}

// record notes the milestones an object shows at "at".
func (tr *tracker) record(obj any, member string, at time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch o := obj.(type) {
	case *batchv1alpha1.Job:
		ch := tr.get(o.Name)
		if member == "" {
			set(&ch.created, at)
			ch.hj = o.Labels[hbv1.HyperJobNameLabel]
			return
		}
		set(&ch.inMember, at)
		ch.cluster = member
		switch o.Status.State.Phase {
		case batchv1alpha1.Running, batchv1alpha1.Completing, batchv1alpha1.Completed:
			if ch.runs.IsZero() {
				ch.runs = at
				tr.running++
			}
		}
	case *policyv1alpha1.PropagationPolicy:
		if o.Spec.Suspension == nil || !ptr.Deref(o.Spec.Suspension.Dispatching, false) {
			set(&tr.get(o.Name).released, at)
		}
	case *workv1alpha2.ResourceBinding:
		if len(o.Spec.Clusters) > 0 {
			set(&tr.get(strings.TrimSuffix(o.Name, "-job")).scheduled, at)
		}
	}
}

// planeIdleCores is the Karmada plane's CPU use at rest (cores), over d.
func planeIdleCores(ctx context.Context, d time.Duration) float64 {
	sum := func() float64 {
		var s float64
		for _, p := range fed.Processes() {
			if p.Where == "karmada" {
				s += p.Process.CPUSeconds()
			}
		}
		return s
	}
	before := sum()
	select {
	case <-time.After(d): // a measurement window, not a wait for a condition
	case <-ctx.Done():
	}
	return (sum() - before) / d.Seconds()
}

// decisionStats reads the auto decisions' count and total seconds from this process's registry.
func decisionStats() (uint64, float64) {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "hyperbatch_hyperjob_auto_split_decision_seconds" && len(mf.GetMetric()) > 0 {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

func cpuSelf() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func autoHyperJob(ns, name string, children int) *trainingv1alpha1.HyperJob {
	p := builders.PodTemplate("busybox:1", 1)
	p.Spec.SchedulerName = "volcano"
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	rj := builders.MakeReplicatedJob("w", int32(children)).Template(p).Obj()
	rj.TemplateSpec.SchedulerName = "volcano"
	rj.TemplateSpec.Queue = "default"
	rj.SplitPolicy = &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeAuto, Accelerators: ptr.To(1), AcceleratorType: ptr.To(string(membercluster.GPUResource))}
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(rj).Obj()
	hj.Spec.MaxDomains = ptr.To[int32](2)
	return hj
}

func runCase(b *testing.B, ns string, hyperJobs, children int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	plane := fed.Plane
	if err := plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	tr := &tracker{children: map[string]*child{}}
	tr.watch(ctx, b, plane.Config, ns, &batchv1alpha1.JobList{}, "")
	tr.watch(ctx, b, plane.Config, ns, &policyv1alpha1.PropagationPolicyList{}, "")
	tr.watch(ctx, b, plane.Config, ns, &workv1alpha2.ResourceBindingList{}, "")
	for name, m := range fed.Members {
		tr.watch(ctx, b, m.Config, ns, &batchv1alpha1.JobList{}, name)
	}
	// QPS -1: what cmd/manager runs with when the kubeconfig sets no limit (ctrl.GetConfig).
	stopMgr, err := federation.StartHyperJobController(fed.Plane, ns, -1, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := stopMgr(); err != nil {
			b.Errorf("manager: %v", err)
		}
	}()

	idle := planeIdleCores(ctx, 10*time.Second)
	dn0, ds0 := decisionStats()
	cpu0 := map[string]float64{}
	for _, p := range fed.Processes() {
		cpu0[p.Where+"/"+p.Process.Name] = p.Process.CPUSeconds()
	}
	self0 := cpuSelf()
	// Karmada's own metrics before and after: a failed scrape loses that report, not the case.
	metrics0, scrapeErr := scrapeKarmada(ctx, plane.Cluster, plane.Config)
	if scrapeErr != nil {
		b.Errorf("Karmada's metrics before the case: %v", scrapeErr)
	}
	want := hyperJobs * children
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < hyperJobs; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := plane.Client.Create(ctx, autoHyperJob(ns, fmt.Sprintf("h%03d", i), children)); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	lastProgress := time.Now()
	for {
		tr.mu.Lock()
		r := tr.running
		tr.mu.Unlock()
		if r >= want {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("only %d of %d children ran in their members after %s: %s", r, want, time.Since(t0).Round(time.Second), tr.progress())
		}
		if time.Since(lastProgress) >= 30*time.Second {
			// Progress on stderr while the case runs (b.Logf prints only at its end), so a case
			// stopped early still tells how far each stage got.
			fmt.Fprintf(os.Stderr, "multicluster bench: %s after %s: %s\n", ns, time.Since(t0).Round(time.Second), tr.progress())
			lastProgress = time.Now()
		}
		time.Sleep(200 * time.Millisecond) // polling a counter this process's watches fill
	}
	total := time.Since(t0)
	b.StopTimer()
	self := cpuSelf() - self0
	cpu := map[string]float64{}
	for _, p := range fed.Processes() {
		k := p.Where + "/" + p.Process.Name
		cpu[k] = p.Process.CPUSeconds() - cpu0[k]
	}
	dn, ds := decisionStats()
	report(b, ns, hyperJobs, children, total, tr, cpu, self, idle, dn-dn0, ds-ds0)
	if metrics1, err := scrapeKarmada(ctx, plane.Cluster, plane.Config); err != nil {
		b.Errorf("Karmada's metrics after the case: %v", err)
	} else if scrapeErr == nil {
		// On stderr: testing keeps only the first 10 lines of a benchmark's log.
		fmt.Fprintf(os.Stderr, "multicluster bench: %s: where Karmada's time went (its own metrics over the case):\n%s\n", ns, strings.Join(karmadaReport(metrics0, metrics1, total), "\n"))
	}
	// Clean up before the next case: the namespace's deletion removes the HyperJobs, and Karmada
	// the members' children. The next case starts only once the plane and the members are empty
	// again, so it does not pay for this one's deletions.
	cleaned := time.Now()
	if err := plane.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatalf("deleting namespace %s: %v", ns, err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer ccancel()
	err = wait.PollUntilContextCancel(cctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := plane.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			return false, nil //nolint:nilerr // still there (or a transient error): poll again
		}
		for _, m := range fed.Members {
			var jobs batchv1alpha1.JobList
			if err := m.Client.List(ctx, &jobs, client.InNamespace(ns), client.Limit(1)); err != nil || len(jobs.Items) > 0 {
				return false, nil //nolint:nilerr // children left (or a transient error): poll again
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("namespace %s and its children not gone from the plane and the members after 10 min: %v", ns, err)
	}
	fmt.Fprintf(os.Stderr, "multicluster bench: %s: plane and members empty again %s after the namespace's deletion\n", ns, time.Since(cleaned).Round(time.Second))
}

// report prints the table: per HyperJob, its critical path split into hyperbatch (plan, decision
// and creates; the release after Karmada scheduled every child), Karmada (scheduling the
// bindings; propagating a released child to its member) and the member (Volcano and kwok until the
// child runs), as the mean over HyperJobs and for the last HyperJob to run.
func report(b *testing.B, ns string, hyperJobs, children int, total time.Duration, tr *tracker, cpu map[string]float64, self, idle float64, decisions uint64, decisionSum float64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	type path struct {
		name                                   string
		created, scheduled, released, in, runs time.Time
		clusters                               map[string]int
	}
	paths := map[string]*path{}
	latest := func(a *time.Time, t time.Time) {
		if t.After(*a) {
			*a = t
		}
	}
	for _, c := range tr.children {
		if c.hj == "" {
			continue
		}
		p := paths[c.hj]
		if p == nil {
			p = &path{name: c.hj, clusters: map[string]int{}}
			paths[c.hj] = p
		}
		latest(&p.created, c.created)
		latest(&p.scheduled, c.scheduled)
		latest(&p.released, c.released)
		latest(&p.in, c.inMember)
		latest(&p.runs, c.runs)
		p.clusters[c.cluster]++
	}
	// Columns: hyperbatch (plan, auto decision, creates), Karmada scheduling, hyperbatch release,
	// Karmada propagation, members; [0] sums over HyperJobs, [1] is the last HyperJob to run.
	var cols [5][2]float64
	var last *path
	perCluster := map[string]int{}
	pos := func(d time.Duration) float64 { return max(d.Seconds(), 0) }
	for _, p := range paths {
		if last == nil || p.runs.After(last.runs) {
			last = p
		}
		for k, v := range p.clusters {
			perCluster[k] += v
		}
	}
	start := last.runs.Add(-total)
	for _, p := range paths {
		v := [5]float64{pos(p.created.Sub(start)), pos(p.scheduled.Sub(p.created)), pos(p.released.Sub(p.scheduled)),
			pos(p.in.Sub(p.released)), pos(p.runs.Sub(p.in))}
		for i := range v {
			cols[i][0] += v[i]
			if p == last {
				cols[i][1] = v[i]
			}
		}
	}
	nh := float64(len(paths))
	var planeCPU, memberCPU float64
	var rows []string
	for k, v := range cpu {
		if strings.HasPrefix(k, "karmada/") {
			planeCPU += v
		} else {
			memberCPU += v
		}
		rows = append(rows, fmt.Sprintf("%s %.1f", k, v))
	}
	sort.Strings(rows)
	b.ReportMetric(total.Seconds(), "s/all-running")
	b.ReportMetric(planeCPU, "karmada-cpu-s")
	b.ReportMetric(self, "hyperbatch-cpu-s")
	b.Logf("%s: %d HyperJobs × %d children = %d children Running in their members %s after creation; children per member %v",
		ns, hyperJobs, children, hyperJobs*children, total.Round(100*time.Millisecond), perCluster)
	b.Logf("critical path of a HyperJob (s)   hyperbatch:create  Karmada:schedule  hyperbatch:release  Karmada:propagate  members:run | hyperbatch  Karmada  members")
	row := func(label string, k int, div float64) {
		c := func(i int) float64 { return cols[i][k] / div }
		b.Logf("  %-32s %17.2f %17.2f %19.2f %18.2f %12.2f | %10.2f %8.2f %8.2f", label, c(0), c(1), c(2), c(3), c(4), c(0)+c(2), c(1)+c(3), c(4))
	}
	row(fmt.Sprintf("mean over %d HyperJobs", len(paths)), 0, nh)
	row("last HyperJob to run ("+last.name+")", 1, 1)
	n, sum := decisions, decisionSum
	b.Logf("auto decisions: %d, mean %.1f ms each (hyperbatch_hyperjob_auto_split_decision_seconds, member reads through the cluster proxy included)", n, 1000*sum/max(float64(n), 1))
	b.Logf("Karmada plane CPU at rest before the case: %.2f cores (so %.1f s of the case's %.1f s are its idle cost)", idle, idle*total.Seconds(), planeCPU)
	b.Logf("CPU s during the case: Karmada plane %.1f, hyperbatch controller process %.1f (the bench process: controller + watches), member processes %.1f (all of both members: etcd, kube-apiserver, Volcano, kwok)", planeCPU, self, memberCPU)
	b.Logf("per process: %s", strings.Join(rows, ", "))
	b.Logf("watches reopened after the apiserver closed them: %d", tr.rewatches)
}
