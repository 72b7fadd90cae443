package scheduler

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// BenchmarkPreemptionLatency is how long a preemptor waits from its preemption to its pods bound,
// hyperbatch-scheduler's gang preemption against the stock kube-scheduler's DefaultPreemption, in
// the same run (issue 38: hyperbatch evicted a domain's victims one at a time, 8 pods took about
// 8 s, and its preemptor bound after 12.3 s against 2.2 s on the stock path).
//
// On the peers harness (peers_bench_test.go, preempt_peers_test.go: the same control plane,
// processes and probe), a 100-node 3-tier tree (racks of 10 nodes, 8 one-CPU slots per node) is
// filled with low-priority gangs of 8, one per node, bound before the scheduler starts. Then
// preemptors arrive one at a time, each once the previous one is bound: 8 high-priority one-CPU
// pods, for hyperbatch a gang (a PodGroup, minMember 8, hard rack), for the stock profile the same
// pods without a PodGroup, placed one by one (DefaultPreemption has no gangs). Each needs 8 victims. Per preemptor:
// preemption to bound is from the first victim's deletion to the last preemptor pod bound, arrival
// to bound from the first pod's creation. Rounds run hyperbatch, default, default, hyperbatch
// (ABBA), llPerRound preemptors each, every round on a fresh fill and a fresh scheduler. Run:
//
//	make build test-tools && KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/scheduler/ -run '^$' -bench PreemptionLatency -benchtime=1x -timeout 30m
//
// Results replace the section "latency 100" of bench/results/preemption.txt (HB_BENCH_RESULTS=off
// leaves it alone); HB_PEERS_LOGS=<dir> keeps the processes' logs. The goal: hyperbatch's median
// preemption to bound at most 1.5 times the stock path's.
func BenchmarkPreemptionLatency(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "kube-apiserver")); err != nil {
		b.Skip("no control-plane binaries; set KUBEBUILDER_ASSETS")
	}
	ctrllog.SetLogger(klog.NewKlogr())
	for _, bin := range []string{"scheduler", "manager"} {
		if _, err := os.Stat(filepath.Join(framework.RepoRoot(), "bin", bin)); err != nil {
			b.Fatalf("bin/%s is missing: run 'make build' first", bin)
		}
	}
	tree := threeTier(tpRack * tpSpine)
	b.StopTimer()
	begin, load0 := time.Now(), framework.LoadAverage()
	p := newPreemptEnv(b, tree, "latency-"+tree.label, "")
	runs := map[string]*latencyRuns{"hyperbatch": {}, "default": {}}
	for round, s := range []peerSched{preemptScheds[0], preemptScheds[1], preemptScheds[1], preemptScheds[0]} {
		ok := b.Run(fmt.Sprintf("%d-%s", round, s.name), func(b *testing.B) {
			p.b = b
			runs[s.name].add(p.latencyRound(s, round))
		})
		p.b = b
		if !ok {
			b.Fatalf("round %d (%s) failed; see its log", round, s.name)
		}
	}
	report := latencyReport(tree, runs["hyperbatch"], runs["default"])
	b.Log("\n" + report)
	if os.Getenv("HB_BENCH_RESULTS") != "off" {
		head := fmt.Sprintf("# %s BenchmarkPreemptionLatency, %d nodes, GOMAXPROCS=%d, %s; load average %s at start, %s at end (the machine is shared); wall time %s\n"+
			"# make build test-tools && KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/scheduler/ -run '^$' -bench PreemptionLatency -benchtime=1x -timeout 30m\n",
			time.Now().UTC().Format(time.RFC3339), tree.nodes, runtime.GOMAXPROCS(0), runtime.Version(), load0, framework.LoadAverage(),
			time.Since(begin).Round(time.Second))
		if err := framework.WriteResultSection("preemption.txt", "latency "+tree.label, head+report); err != nil {
			b.Errorf("writing bench/results/preemption.txt: %v", err)
		}
	}
}

const (
	llPerRound = 4 // preemptors per round
	llSize     = 8 // pods per preemptor (= victims it needs)
	llTimeout  = 90 * time.Second
)

// latencyRuns are one scheduler's preemptors over its rounds.
type latencyRuns struct {
	preemptToBound, arrivalToBound []time.Duration
	evicted, preemptors, unbound   int
}

func (r *latencyRuns) add(o latencyRuns) {
	r.preemptToBound = append(r.preemptToBound, o.preemptToBound...)
	r.arrivalToBound = append(r.arrivalToBound, o.arrivalToBound...)
	r.evicted += o.evicted
	r.preemptors += o.preemptors
	r.unbound += o.unbound
}

// deletions records when fill pods are deleted, from a watch opened at rv.
type deletions struct {
	mu    sync.Mutex
	times []time.Time
}

func (d *deletions) follow(ctx context.Context, p *peerEnv, ns, rv string) {
	for ctx.Err() == nil {
		w, err := p.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				rv = pod.ResourceVersion
				if ev.Type == watch.Deleted {
					d.mu.Lock()
					d.times = append(d.times, time.Now())
					d.mu.Unlock()
				}
			}
		}
		w.Stop()
	}
}

// since returns the first deletion at or after t and how many deletions there were since t.
func (d *deletions) since(t time.Time) (time.Time, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	n := 0
	for _, at := range d.times {
		if at.Before(t) {
			continue
		}
		if n == 0 {
			first = at
		}
		n++
	}
	return first, n
}

// latencyRound fills the tree, starts s and lets llPerRound preemptors arrive one after another.
func (p *peerEnv) latencyRound(s peerSched, round int) latencyRuns {
	b, ctx := p.b, context.Background()
	var fill []fillGang
	for n := 0; n < p.tree.nodes; n++ {
		g := fillGang{name: fmt.Sprintf("f%04d", n)}
		for k := 0; k < p.tree.peerSlots; k++ {
			g.slots = append(g.slots, n*p.tree.peerSlots+k)
		}
		fill = append(fill, g)
	}
	fillNS := newNamespace(b, p.cs, fmt.Sprintf("fill-%d-%s", round, s.name))
	defer p.cleanup(s, fillNS)
	p.createFill(fillNS, s.schedulerName, fill)
	pp := p.start(s)
	defer pp.stop(b)

	l, err := p.cs.CoreV1().Pods(fillNS).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	del := &deletions{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go del.follow(wctx, p, fillNS, l.ResourceVersion)

	var out latencyRuns
	var spent []string // the preemptors' namespaces, emptied before the scheduler stops
	defer func() {
		for _, ns := range spent {
			p.cleanup(s, ns)
		}
	}()
	for k := 0; k < llPerRound; k++ {
		ns := newNamespace(b, p.cs, fmt.Sprintf("pre-%d-%s-%d", round, s.name, k))
		spent = append(spent, ns)
		name := fmt.Sprintf("p%d", k)
		st := &boundState{bound: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{},
			seen: map[string]bool{}, done: make(chan struct{}), total: llSize}
		sctx, stop := context.WithCancel(wctx)
		go st.follow(sctx, p.cs, ns)
		arrival := time.Now()
		if s.gang {
			pg := builders.MakePodGroup(ns, name).MinMember(llSize).Queue("default").HardTier(1).Obj()
			pg.Spec.PriorityClassName = ppHighClass
			if err := p.env.Client.Create(ctx, pg); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < llSize; i++ {
			pod := peerPod(ns, fmt.Sprintf("%s-%d", name, i), name, s.schedulerName)
			pod.Spec.PriorityClassName = ppHighClass
			if _, err := p.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		out.preemptors++
		select {
		case <-st.done:
		case <-time.After(llTimeout):
			out.unbound++
			b.Logf("%s: preemptor %d not bound within %s", s.name, k, llTimeout)
		}
		stop()
		st.mu.Lock()
		last, all := st.last[name], st.n == llSize
		st.mu.Unlock()
		first, n := del.since(arrival)
		if all {
			out.arrivalToBound = append(out.arrivalToBound, last.Sub(arrival))
			if !first.IsZero() {
				out.preemptToBound = append(out.preemptToBound, last.Sub(first))
			}
		}
		out.evicted += n
		b.Logf("%s round %d preemptor %d: %d victims, preemption to bound %s, arrival to bound %s", s.name, round, k, n,
			last.Sub(first).Round(10*time.Millisecond), last.Sub(arrival).Round(10*time.Millisecond))
	}
	cancel()
	pp.checkAlive(b, s.name)
	return out
}

// latencyReport is the results section.
func latencyReport(t peerTree, hb, def *latencyRuns) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## %d nodes (%d one-CPU slots each), %d HyperNodes in %d tiers, full: one low-priority gang of %d per node; preemptors of %d one-CPU high-priority pods arrive one at a time (hyperbatch: a gang, hard rack; default: the same pods one by one), %d per round, rounds hyperbatch/default/default/hyperbatch\n",
		t.nodes, t.peerSlots, t.hyperNodes(), t.tiers(), t.peerSlots, llSize, llPerRound)
	fmt.Fprintf(&sb, "%-11s %11s %11s %20s %20s %20s\n", "scheduler", "preemptors", "evicted/p", "preempt-to-bound p50", "preempt-to-bound max", "arrival-to-bound p50")
	row := func(name string, r *latencyRuns) {
		per := math.NaN()
		if r.preemptors > 0 {
			per = float64(r.evicted) / float64(r.preemptors)
		}
		fmt.Fprintf(&sb, "%-11s %8d/%-2d %11.1f %19.2fs %19.2fs %19.2fs\n", name, r.preemptors-r.unbound, r.preemptors, per,
			quantile(r.preemptToBound, 0.5).Seconds(), quantile(r.preemptToBound, 1).Seconds(), quantile(r.arrivalToBound, 0.5).Seconds())
	}
	row("hyperbatch", hb)
	row("default", def)
	h, d := quantile(hb.preemptToBound, 0.5), quantile(def.preemptToBound, 0.5)
	ratio := "-"
	if d > 0 && h > 0 {
		ratio = fmt.Sprintf("%.2fx", h.Seconds()/d.Seconds())
	}
	fmt.Fprintf(&sb, "preemption to bound p50, hyperbatch / default: %s (goal <= 1.5x)", ratio)
	if ha, da := quantile(hb.arrivalToBound, 0.5), quantile(def.arrivalToBound, 0.5); ha > 0 && da > 0 {
		fmt.Fprintf(&sb, "; arrival to bound p50: %.2fx", ha.Seconds()/da.Seconds())
	}
	sb.WriteString("\n")
	if hb.unbound+def.unbound > 0 {
		fmt.Fprintf(&sb, "note: preemptors not bound within %s: hyperbatch %d, default %d (left out of the times)\n", llTimeout, hb.unbound, def.unbound)
	}
	return sb.String()
}
