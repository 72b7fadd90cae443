package scheduler

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// BenchmarkPreemptionPeers is gang preemption end to end, on the peers harness (peers_bench_test.go:
// the same control plane, processes, probe and HyperNode tree). A 1,000-node 3-tier tree (racks of
// 10 nodes, spines of 10 racks; 8 one-CPU slots per node) is filled completely with low-priority
// gangs of 8 and 32 pods (PodGroups, minMember = size), laid along the nodes half a node out of step,
// so every gang shares its nodes with its neighbours and some span two racks. The fill is created
// bound (spec.nodeName), before the scheduler starts, identical for every scheduler. Then 20
// high-priority gangs of 8, 32 and 128 pods arrive together (hard highestTierAllowed = the lowest
// tier that holds them on empty nodes: rack, rack, spine), and each scheduler must preempt to place
// them:
//   - hyperbatch: hyperbatch-scheduler with docs/scheduler-config.yaml (gang preemption, PostFilter)
//     and its manager's podgroupstatus controller;
//   - default: the stock kube-scheduler profile (DefaultPreemption, pod by pod; no gangs);
//   - volcano: vc-scheduler v1.14.0-alpha.0 with the configuration Volcano ships for its preempt and
//     reclaim actions (volcano-scheduler-preempt.conf next to this file) and its controllers.
//
// The pods terminate at once (terminationGracePeriodSeconds 0, no kubelet), so an evicted pod is
// gone when the scheduler deletes it. Per scheduler the benchmark reports victim gangs per placed
// preemptor gang (a victim gang is one that lost any pod: its job fails whole), evicted pods, partly
// evicted gangs (victims still partly running 10 s after the last preemptor bound or the timeout),
// the share of preemptor gangs placed in their lowest feasible tier, and arrival (PodGroup created)
// to placed (last pod bound) p50 and p99; an unplaced gang counts the timeout, a lower bound. Run:
//
//	make build test-tools && KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/scheduler/ -run '^$' -bench PreemptionPeers -benchtime=1x -timeout 60m
//
// HB_PREEMPT_NODES (default 1000, a multiple of 100) sizes the tree; HB_PEERS_SCHEDULERS=a,b runs only
// the named rows; HB_PREEMPT_TIMEOUT (default 3m) bounds each scheduler's run; HB_PEERS_LOGS keeps
// the processes' logs. Results replace the section "end-to-end <nodes>" of
// bench/results/preemption.txt (HB_BENCH_RESULTS=off leaves it alone).

const (
	ppLowClass   = "hb-bench-low"  // priority 100: the fill
	ppHighClass  = "hb-bench-high" // priority 1000: the preemptors
	ppProbeNode  = "hb-bench-probe"
	probeTaint   = "hyperbatch.dev/bench-probe"
	ppArrivals   = 20
	ppSettle     = 10 * time.Second // how long a partly evicted victim gang may take to be evicted whole
	ppFillShift  = 4                // the fill starts half a node in
	ppFillSeed   = 26
	ppFillCreate = 16 // parallel creators of the fill
)

// preemptScheds are the rows, in run order.
var preemptScheds = []peerSched{
	{"hyperbatch", hbName, true},
	{"default", defaultName, false},
	{"volcano", "volcano", true},
}

func preemptTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HB_PREEMPT_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Minute
}

// fillGang is one low-priority gang of the fill and the slots (node*slots + k) its pods take.
type fillGang struct {
	name  string
	slots []int
}

// preemptFill lays gangs of 8 and 32 (even odds, fixed seed) along every slot of the tree, starting
// ppFillShift slots in and wrapping around, so the cluster is full.
func preemptFill(t peerTree) []fillGang {
	rng := rand.New(rand.NewSource(ppFillSeed))
	total := t.nodes * t.peerSlots
	var out []fillGang
	for at := 0; at < total; {
		size := 8
		if rng.Intn(2) == 0 && at+32 <= total {
			size = 32
		}
		g := fillGang{name: fmt.Sprintf("f%04d", len(out))}
		for k := 0; k < size; k++ {
			g.slots = append(g.slots, (at+k+ppFillShift)%total)
		}
		out = append(out, g)
		at += size
	}
	return out
}

// preemptors are the arriving gangs: 20 of the peers sizes (8, 32, 128) in a fixed shuffled order,
// hard, highestTierAllowed = the lowest tier that holds them on empty nodes.
func preemptors(t peerTree) []peerGang {
	sizes := shuffledSizes((ppArrivals + len(tpGangSizes) - 1) / len(tpGangSizes))[:ppArrivals]
	out := make([]peerGang, len(sizes))
	for i, s := range sizes {
		out[i] = peerGang{name: fmt.Sprintf("p%02d-%d", i, s), size: s, tier: t.emptyTier(s)}
	}
	return out
}

// preemptRun is one scheduler's run.
type preemptRun struct {
	gangs, placed   int
	lowest          int // placed in their lowest feasible tier
	aboveHard       int
	latency         []time.Duration
	victimGangs     int // fill gangs that lost any pod
	evicted         int // fill pods deleted
	lostPods        int // pods of the victim gangs (a gang that lost a pod has lost its run)
	partial         int // victim gangs still partly running after ppSettle
	timedOut        bool
	elapsed         time.Duration
	cpu, compCPU    float64
	fillGangs, fill int
}

func (r preemptRun) perPlaced(v int) float64 {
	if r.placed == 0 {
		return math.NaN()
	}
	return float64(v) / float64(r.placed)
}

// BenchmarkPreemptionPeers: see the comment at the top of this file.
func BenchmarkPreemptionPeers(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "kube-apiserver")); err != nil {
		b.Skip("no control-plane binaries; set KUBEBUILDER_ASSETS")
	}
	ctrllog.SetLogger(klog.NewKlogr())
	root := framework.RepoRoot()
	for _, bin := range []string{"scheduler", "manager"} {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			b.Fatalf("bin/%s is missing: run 'make build' first", bin)
		}
	}
	only := os.Getenv("HB_PEERS_SCHEDULERS")
	selected := func(s peerSched) bool { return only == "" || strings.Contains(","+only+",", ","+s.name+",") }
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "vc-scheduler")); err != nil && selected(preemptScheds[2]) {
		b.Fatalf("vc-scheduler is missing from %s: run 'hack/tools.sh vc-scheduler vc-controller-manager'", framework.AssetsDir())
	}
	vcConf, err := os.ReadFile(filepath.Join(root, "bench", "scheduler", "volcano-scheduler-preempt.conf"))
	if err != nil {
		b.Fatal(err)
	}
	nodes := 1000
	if v := os.Getenv("HB_PREEMPT_NODES"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &nodes); err != nil || nodes < tpRack*tpSpine || nodes%(tpRack*tpSpine) != 0 {
			b.Fatalf("HB_PREEMPT_NODES=%q: want a multiple of %d", v, tpRack*tpSpine)
		}
	}
	tree := threeTier(nodes)
	b.StopTimer()
	begin, load0 := time.Now(), framework.LoadAverage()
	p := newPreemptEnv(b, tree, "preempt-"+tree.label, string(vcConf))
	runs := make([]*preemptRun, len(preemptScheds))
	failed := map[string]string{}
	write := func() {
		body := preemptReport(tree, runs, failed)
		if os.Getenv("HB_BENCH_RESULTS") == "off" {
			return
		}
		head := fmt.Sprintf("# %s BenchmarkPreemptionPeers, %d nodes, GOMAXPROCS=%d, %s; load average %s at start, %s at end (the machine is shared); wall time %s\n"+
			"# make build test-tools && KUBEBUILDER_ASSETS=$PWD/bin HB_PREEMPT_NODES=%d HB_PREEMPT_TIMEOUT=%s go test ./bench/scheduler/ -run '^$' -bench PreemptionPeers -benchtime=1x -timeout 60m\n",
			time.Now().UTC().Format(time.RFC3339), nodes, runtime.GOMAXPROCS(0), runtime.Version(), load0, framework.LoadAverage(),
			time.Since(begin).Round(time.Second), nodes, preemptTimeout())
		if err := framework.WriteResultSection("preemption.txt", "end-to-end "+tree.label, head+body); err != nil {
			b.Errorf("writing bench/results/preemption.txt: %v", err)
		}
	}
	for k, s := range preemptScheds {
		if !selected(s) {
			continue
		}
		// Each row is a sub-benchmark: a scheduler that fails (does not start, a process exits) fails
		// its own row, and the results written so far stay.
		ok := b.Run(s.name, func(b *testing.B) {
			p.b = b
			r := p.preemptRun(s)
			runs[k] = &r
			b.ReportMetric(r.perPlaced(r.victimGangs), "victims/gang")
		})
		p.b = b
		if !ok && runs[k] == nil {
			failed[s.name] = "the run failed (see the benchmark's log)"
		}
		write()
	}
	b.Log("\n" + preemptReport(tree, runs, failed))
	if h := runs[0]; h != nil && (h.partial > 0 || h.aboveHard > 0) {
		b.Errorf("hyperbatch: %d partly evicted victim gangs, %d preemptors above their highestTierAllowed", h.partial, h.aboveHard)
	}
}

// newPreemptEnv starts a control plane with the tree, the probe node (outside the tree, tainted
// probeTaint: the tree will be full), Volcano's root and default Queues and the two priority
// classes; HB_PEERS_LOGS=<dir> keeps the processes' logs in <dir>/<logName>.
func newPreemptEnv(b *testing.B, tree peerTree, logName, vcConf string) *peerEnv {
	env, cs := startControlPlane(b)
	dir := b.TempDir()
	if keep := os.Getenv("HB_PEERS_LOGS"); keep != "" {
		dir = filepath.Join(keep, logName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kc); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	tree.create(b, cs, env)
	probeRes := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10")}
	if err := createReadyNode(ctx, cs, ppProbeNode, map[string]string{corev1.LabelHostname: ppProbeNode}, probeRes,
		[]corev1.Taint{{Key: probeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{"root", "default"} { // as Volcano's scheduler creates them
		if err := env.Client.Create(ctx, &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q},
			Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(q != "root")}}); err != nil {
			b.Fatal(err)
		}
	}
	for name, v := range map[string]int32{ppLowClass: 100, ppHighClass: 1000} {
		if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, builders.PriorityClass(name, v), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return &peerEnv{b: b, env: env, cs: cs, dir: dir, kc: kc, tree: tree, vcConf: vcConf, probeNode: ppProbeNode}
}

// fillPod is a low-priority fill pod, bound to its node at creation.
func fillPod(ns, name, group, scheduler, node string) *corev1.Pod {
	pod := peerPod(ns, name, group, scheduler)
	pod.Spec.PriorityClassName = ppLowClass
	pod.Spec.NodeName = node
	return pod
}

// createFill creates the fill's PodGroups and bound pods in ns.
func (p *peerEnv) createFill(ns, scheduler string, fill []fillGang) {
	b, ctx := p.b, context.Background()
	framework.Parallel(b, ppFillCreate, len(fill), func(i int) error {
		g := fill[i]
		pg := builders.MakePodGroup(ns, g.name).MinMember(int32(len(g.slots))).Queue("default").Obj()
		pg.Spec.PriorityClassName = ppLowClass
		return p.env.Client.Create(ctx, pg)
	})
	type ref struct{ g, k int }
	var refs []ref
	for i, g := range fill {
		for k := range g.slots {
			refs = append(refs, ref{i, k})
		}
	}
	framework.Parallel(b, ppFillCreate, len(refs), func(i int) error {
		g := fill[refs[i].g]
		slot := g.slots[refs[i].k]
		_, err := p.cs.CoreV1().Pods(ns).Create(ctx, fillPod(ns, fmt.Sprintf("%s-%02d", g.name, refs[i].k), g.name, scheduler,
			p.tree.nodeName(slot/p.tree.peerSlots)), metav1.CreateOptions{})
		return err
	})
}

// evictions counts the fill pods deleted per gang, from a watch opened at rv.
type evictions struct {
	mu  sync.Mutex
	per map[string]int
}

func (e *evictions) follow(ctx context.Context, p *peerEnv, ns, rv string) {
	for ctx.Err() == nil {
		w, err := p.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = pod.ResourceVersion
			if ev.Type == watch.Deleted {
				e.mu.Lock()
				e.per[pod.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey]]++
				e.mu.Unlock()
			}
		}
		w.Stop()
	}
}

// partial is the number of fill gangs that lost some but not all of their pods.
func (e *evictions) partial(fill []fillGang) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, g := range fill {
		if v := e.per[g.name]; v > 0 && v < len(g.slots) {
			n++
		}
	}
	return n
}

// preemptRun fills the tree for s, starts s, lets the preemptors arrive and measures.
func (p *peerEnv) preemptRun(s peerSched) preemptRun {
	b, ctx := p.b, context.Background()
	fill := preemptFill(p.tree)
	fillNS := newNamespace(b, p.cs, "fill-"+s.name)
	defer p.cleanup(s, fillNS) // the next row starts on empty nodes
	t0 := time.Now()
	p.createFill(fillNS, s.schedulerName, fill)
	r := preemptRun{gangs: ppArrivals, fillGangs: len(fill)}
	for _, g := range fill {
		r.fill += len(g.slots)
	}
	b.Logf("%s: fill of %d gangs, %d pods created in %s", s.name, r.fillGangs, r.fill, time.Since(t0).Round(time.Second))
	// The scheduler starts after the fill exists: its informers' first list holds the full cluster.
	pp := p.start(s)
	defer pp.stop(b)
	cpu0, ccpu0 := cpuOf(pp.sched), cpuOf(pp.comp)

	l, err := p.cs.CoreV1().Pods(fillNS).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	ev := &evictions{per: map[string]int{}}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go ev.follow(wctx, p, fillNS, l.ResourceVersion)

	ns := newNamespace(b, p.cs, "pre-"+s.name)
	defer p.cleanup(s, ns)
	gangs := preemptors(p.tree)
	st := &boundState{bound: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{},
		seen: map[string]bool{}, done: make(chan struct{})}
	for _, g := range gangs {
		st.total += g.size
	}
	go st.follow(wctx, p.cs, ns)
	created := map[string]time.Time{}
	start := time.Now()
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for _, g := range gangs {
		pg := builders.MakePodGroup(ns, g.name).MinMember(int32(g.size)).Queue("default").HardTier(g.tier).Obj()
		pg.Spec.PriorityClassName = ppHighClass
		created[g.name] = time.Now()
		if err := p.env.Client.Create(ctx, pg); err != nil {
			b.Fatal(err)
		}
		work := make(chan int)
		for w := 0; w < peerCreators; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					pod := peerPod(ns, fmt.Sprintf("%s-%03d", g.name, i), g.name, s.schedulerName)
					pod.Spec.PriorityClassName = ppHighClass
					if _, err := p.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				}
			}()
		}
		for i := 0; i < g.size; i++ {
			work <- i
		}
		close(work)
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("%s: creating the preemptors: %v", s.name, err)
	default:
	}
	select {
	case <-st.done:
	case <-time.After(preemptTimeout() - time.Since(start)):
		r.timedOut = true
	}
	end := time.Now()
	// Victim gangs being evicted whole are given ppSettle to finish.
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, ppSettle, true, func(context.Context) (bool, error) {
		return ev.partial(fill) == 0, nil
	})
	cancel()
	r.cpu, r.compCPU = cpuOf(pp.sched)-cpu0, cpuOf(pp.comp)-ccpu0
	pp.checkAlive(b, s.name)
	if strings.HasPrefix(s.name, "volcano") {
		saveVolcanoMetrics(b, pp.sched, pp.logDir)
	}

	// Judged on one List of the bound pods (finalBound), the watch only times the bindings.
	final, err := finalBound(p.cs, p.tree, ns)
	if err != nil {
		b.Fatalf("%s: %v", s.name, err)
	}
	st.mu.Lock()
	for _, g := range gangs {
		nodes := final.nodes[g.name]
		if len(nodes) < g.size {
			r.latency = append(r.latency, end.Sub(created[g.name]))
			continue
		}
		r.placed++
		r.latency = append(r.latency, st.last[g.name].Sub(created[g.name]))
		tier := p.tree.lowestTier(nodes)
		if tier <= p.tree.emptyTier(g.size) {
			r.lowest++
		}
		if tier > g.tier {
			r.aboveHard++
		}
		if last := st.last[g.name].Sub(start); last > r.elapsed {
			r.elapsed = last
		}
	}
	st.mu.Unlock()
	if r.timedOut {
		r.elapsed = end.Sub(start)
	}
	ev.mu.Lock()
	for _, g := range fill {
		if v := ev.per[g.name]; v > 0 {
			r.victimGangs++
			r.evicted += v
			r.lostPods += len(g.slots)
			if v < len(g.slots) {
				r.partial++
			}
		}
	}
	ev.mu.Unlock()
	b.Logf("%-10s %d/%d preemptors placed in %.1fs (timed out: %v), victim gangs %d, evicted pods %d, partly evicted %d, lowest tier %d, p50 %.1fs p99 %.1fs; logs in %s",
		s.name, r.placed, r.gangs, r.elapsed.Seconds(), r.timedOut, r.victimGangs, r.evicted, r.partial, r.lowest,
		quantile(r.latency, 0.5).Seconds(), quantile(r.latency, 0.99).Seconds(), pp.logDir)
	return r
}

// preemptReport is the results section: a row per scheduler and the ratios.
func preemptReport(t peerTree, runs []*preemptRun, failed map[string]string) string {
	var sb strings.Builder
	var ref *preemptRun
	for _, r := range runs {
		if r != nil {
			ref = r
			break
		}
	}
	if ref == nil {
		out := "no scheduler completed its run\n"
		for name, why := range failed {
			out += "note: " + name + ": " + why + "\n"
		}
		return out
	}
	sizes := map[int]int{}
	for _, g := range preemptors(t) {
		sizes[g.size]++
	}
	var mix []string
	for _, s := range tpGangSizes {
		mix = append(mix, fmt.Sprintf("%d x %d", sizes[s], s))
	}
	fmt.Fprintf(&sb, "## %d nodes (8 one-CPU slots each), %d HyperNodes in %d tiers, full: %d low-priority gangs of 8 and 32 (%d pods); %d high-priority gangs arrive together (%s pods; hard, rack for 8 and 32, spine for 128); timeout %s\n",
		t.nodes, t.hyperNodes(), t.tiers(), ref.fillGangs, ref.fill, ppArrivals, strings.Join(mix, ", "), preemptTimeout())
	fmt.Fprintf(&sb, "%-11s %7s %14s %13s %10s %11s %9s %8s %8s %10s %10s\n", "scheduler", "placed", "victims/gang", "evicted/gang", "lost/gang", "partly-ev.", "lowest-%", "p50-s", "p99-s", "cpu-s", "comp-cpu-s")
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for k, r := range runs {
		if r == nil {
			continue
		}
		fmt.Fprintf(&sb, "%-11s %4d/%-2d %14s %13s %10s %11d %9.1f %8.1f %8.1f %10.1f %10.1f\n", preemptScheds[k].name, r.placed, r.gangs,
			f(r.perPlaced(r.victimGangs)), f(r.perPlaced(r.evicted)), f(r.perPlaced(r.lostPods)), r.partial,
			100*float64(r.lowest)/float64(r.gangs), quantile(r.latency, 0.5).Seconds(), quantile(r.latency, 0.99).Seconds(), r.cpu, r.compCPU)
	}
	h := runs[0]
	if h == nil {
		return sb.String()
	}
	best, bestName := math.NaN(), ""
	for k, r := range runs[1:] {
		if r == nil {
			continue
		}
		if v := r.perPlaced(r.victimGangs); !math.IsNaN(v) && (math.IsNaN(best) || v < best) {
			best, bestName = v, preemptScheds[k+1].name
		}
	}
	ratio := func(x, y float64) string {
		if math.IsNaN(x) || math.IsNaN(y) || y == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", x/y)
	}
	hv := h.perPlaced(h.victimGangs)
	fmt.Fprintf(&sb, "victims per placed gang, hyperbatch / best peer (%s): %s (goal <= 1.0x)", bestName, ratio(hv, best))
	if d := runs[1]; d != nil {
		fmt.Fprintf(&sb, "; hyperbatch / default: %s (target <= 0.5x)", ratio(hv, d.perPlaced(d.victimGangs)))
	}
	fmt.Fprintf(&sb, "; hyperbatch partly evicted gangs %d (goal 0), lowest feasible tier %.0f%% (goal 100%%)\n", h.partial, 100*float64(h.lowest)/float64(h.gangs))
	var notes []string
	for k, r := range runs {
		if r != nil && r.placed < r.gangs {
			notes = append(notes, fmt.Sprintf("%s placed %d of %d within the timeout (unplaced gangs count the timeout in p50/p99; their evictions count in the totals: %d victim gangs, %d pods)",
				preemptScheds[k].name, r.placed, r.gangs, r.victimGangs, r.evicted))
		}
	}
	for name, why := range failed {
		notes = append(notes, name+": "+why)
	}
	sort.Strings(notes)
	for _, n := range notes {
		sb.WriteString("note: " + n + "\n")
	}
	return sb.String()
}
