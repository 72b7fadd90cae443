package scheduler

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/schedulerenv"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// Throughput setup, for each of tpNodeCounts fake nodes (8 CPU, 110 pods each) in its own control
// plane: a 3-tier tree of racks of 10 nodes (tier 1, labelMatch), spines of 10 racks (tier 2,
// 100 nodes) and one zone holding every spine (tier 3). The workload is tpRounds rounds of one gang
// of each of tpGangSizes, in a fixed shuffled order: 36 PodGroups (minMember = size, hard
// highestTierAllowed = 2) and 2,016 pods of 1 CPU, so a node holds 8 pods, a rack 80 and a spine
// 800: at the start 8 and 32 fit a rack (tier 1) and 128 only a spine (tier 2). The workload uses
// 25% of the CPU of 1,000 nodes and 5% of 5,000.
const (
	tpRack      = 10 // nodes per rack (tier 1)
	tpSpine     = 10 // racks per spine (tier 2)
	tpNodeCPU   = 8  // allocatable CPUs per node; every workload pod requests one
	tpNodePods  = 110
	tpRounds    = 12
	tpHardTier  = 2 // highestTierAllowed of every gang (hard)
	tpZoneTier  = 3
	tpCreators  = 8  // parallel pod creators
	tpSetupPar  = 16 // parallel clients creating nodes
	defaultName = "default-scheduler"
	hbName      = "hyperbatch-scheduler"
)

var (
	tpNodeCounts = nodeCounts() // HB_BENCH_NODES=1000 runs the small size only
	tpGangSizes  = []int{8, 32, 128}
	// Index 0 is the baseline of the ratio.
	tpProfiles = []struct{ name, scheduler string }{
		{"default", defaultName},
		{"hyperbatch", hbName},
	}
)

// nodeCounts is tpNodeCounts: 1,000 and 5,000, or the comma-separated HB_BENCH_NODES.
func nodeCounts() []int {
	v := os.Getenv("HB_BENCH_NODES")
	if v == "" {
		return []int{1000, 5000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err == nil && n >= tpRack*tpSpine {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkSchedulingThroughput measures, on 1,000 and 5,000 fake nodes against a real
// kube-apiserver, the end-to-end rate (pods created → all bound) of the stock profile and of the
// hyperbatch profile on the same gang workload (see the constants above) in the same control plane,
// and where each gang landed. One iteration runs the workload four times, default, hyperbatch,
// hyperbatch, default (ABBA), so that drift in the machine's load and the position in the run weigh
// on both profiles alike (with one pair, swapping the order moved the 1,000-node ratio on this
// machine from 1.65x to 0.86x). Each workload gets a fresh scheduler with one profile (a
// scheduler's profiles must share one QueueSort plugin), warmed by one probe pod before the clock
// starts. Metrics:
//
//   - <profile>-pods/s: workload pods ÷ time from the first pod create to the last pod bound, summed
//     over the profile's workloads;
//   - hyperbatch/default: the ratio of the two, from the same run;
//   - <profile>-lowest-tier-%: gangs whose pods all landed in one HyperNode of the lowest tier that
//     could have held the whole gang given the capacity at the start of the workload. For the default
//     profile, which ignores PodGroups, a gang is the same set of pods;
//   - <profile>-leaves/gang-<size>: racks (leaf HyperNodes) a gang of that size uses, on average
//     (the fewest possible is ceil(size / 80) when racks are empty: 1 for 8 and 32, 2 for 128).
//
// It needs the control-plane binaries (KUBEBUILDER_ASSETS or bin/) and is skipped without them.
// Use -benchtime=1x. A dated summary is appended to bench/results/scheduler.txt unless
// HB_BENCH_RESULTS=off.
func BenchmarkSchedulingThroughput(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "kube-apiserver")); err != nil {
		b.Skip("no control-plane binaries; set KUBEBUILDER_ASSETS")
	}
	dir := b.TempDir()
	quietKlog(b, dir)
	load0 := framework.LoadAverage()
	var rows []tpRow
	var setups []string
	for _, nodes := range tpNodeCounts {
		b.Run(fmt.Sprintf("nodes=%d/gangs-8-32-128", nodes), func(b *testing.B) {
			b.StopTimer()
			env, cs := startControlPlane(b)
			setupStart := time.Now()
			tree := setupCluster(b, cs, env, nodes)
			setups = append(setups, fmt.Sprintf("nodes=%d: %d HyperNodes, setup %v", nodes, tree.hyperNodes(), time.Since(setupStart).Round(time.Second)))
			sums := make([]tpResult, len(tpProfiles))
			for i := 0; i < b.N; i++ {
				for _, k := range []int{0, 1, 1, 0} {
					sums[k].add(runProfile(b, cs, env, dir, tree, tpProfiles[k].scheduler))
				}
			}
			out := make([]tpRow, len(tpProfiles))
			for k, p := range tpProfiles {
				out[k] = tpRow{nodes: nodes, profile: p.name, res: sums[k]}
				b.ReportMetric(sums[k].podsPerSec(), p.name+"-pods/s")
				b.ReportMetric(100*sums[k].share(), p.name+"-lowest-tier-%")
				for _, size := range tpGangSizes {
					b.ReportMetric(sums[k].leavesPerGang(size), fmt.Sprintf("%s-leaves/gang-%d", p.name, size))
				}
			}
			out[1].ratio = sums[1].podsPerSec() / sums[0].podsPerSec()
			b.ReportMetric(out[1].ratio, "hyperbatch/default")
			for _, r := range out {
				b.Logf("%s", r.describe())
			}
			b.Logf("opportunistic batching so far (all workloads of this process): %s", batchCounters(b))
			if sums[1].aboveLimit > 0 {
				b.Errorf("%d hyperbatch gangs span a HyperNode above tier %d despite hard highestTierAllowed=%d", sums[1].aboveLimit, tpHardTier, tpHardTier)
			}
			rows = append(rows, out...)
		})
	}
	if len(rows) > 0 && !b.Failed() && os.Getenv("HB_BENCH_RESULTS") != "off" {
		if err := appendResults(rows, setups, load0, framework.LoadAverage()); err != nil {
			b.Errorf("appending to bench/results/scheduler.txt: %v", err)
		}
	}
}

// runProfile runs one workload with a fresh scheduler of the given profile.
func runProfile(b *testing.B, cs kubernetes.Interface, env *framework.Env, dir string, tree tpTree, scheduler string) tpResult {
	ctx, cancel := context.WithCancel(context.Background())
	done := startBenchScheduler(b, ctx, env.Config, dir, scheduler)
	defer func() {
		cancel()
		<-done
		configz.Delete("componentconfig")
	}()
	probe(b, cs, env, scheduler)
	stopProfile := startCPUProfile(b, scheduler, tree.nodes)
	defer stopProfile()
	return runWorkload(b, cs, env, tree, scheduler)
}

// batchCounters is kube-scheduler's scheduler_batch_attempts_total by profile and result (1.35+,
// OpportunisticBatching): whether the stock profile's batching takes part in the figures.
func batchCounters(b *testing.B) string {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "scheduler_batch_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s=%.0f", strings.Join(labels, "/"), m.GetCounter().GetValue()))
		}
	}
	if len(out) == 0 {
		return "none recorded"
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

var tpProfileSeq int

// startCPUProfile writes a CPU profile of the workload (scheduler, clients and waiters share this
// process; the apiserver and etcd do not) to $HB_BENCH_CPUPROFILE/<profile>-<nodes>-<n>.pprof when
// that directory is set, and returns the function that stops it.
func startCPUProfile(b *testing.B, scheduler string, nodes int) func() {
	dir := os.Getenv("HB_BENCH_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	tpProfileSeq++
	path := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.pprof", scheduler, nodes, tpProfileSeq))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("closing %s: %v", path, err)
		}
	}
}

func startControlPlane(b *testing.B) (*framework.Env, kubernetes.Interface) {
	env, err := framework.Start(framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Logf("stopping the control plane: %v", err)
		}
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	// Protobuf, like the scheduler's own client: the harness should cost the shared cores little.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return env, cs
}

// tpTree is the benchmark's HyperNode tree: node i is in rack i/tpRack and spine i/(tpRack*tpSpine).
type tpTree struct{ nodes int }

func (t tpTree) nodeName(i int) string { return fmt.Sprintf("tp-node-%05d", i) }
func (t tpTree) racks() int            { return t.nodes / tpRack }
func (t tpTree) spines() int           { return t.racks() / tpSpine }
func (t tpTree) hyperNodes() int       { return t.racks() + t.spines() + 1 }

// index is the node number of a node name, -1 for a node of no tier.
func (t tpTree) index(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "tp-node-%05d", &i); err != nil || i < 0 || i >= t.nodes {
		return -1
	}
	return i
}

// lowestTier is the tier of the lowest HyperNode holding every one of the given node numbers.
func (t tpTree) lowestTier(nodes []int) int {
	if len(nodes) == 0 {
		return tpZoneTier + 1
	}
	rack, spine := nodes[0]/tpRack, nodes[0]/(tpRack*tpSpine)
	tier := 1
	for _, n := range nodes {
		if n < 0 {
			return tpZoneTier + 1 // the virtual root
		}
		if n/(tpRack*tpSpine) != spine {
			tier = max(tier, tpZoneTier)
		} else if n/tpRack != rack {
			tier = max(tier, 2)
		}
	}
	return tier
}

// capacity is, per tier, the most workload pods (1 CPU) one HyperNode of that tier holds.
type capacity [tpZoneTier + 1]int

// feasibleTier is the lowest tier with a HyperNode that holds size pods.
func (c capacity) feasibleTier(size int) int {
	for tier := 1; tier <= tpZoneTier; tier++ {
		if c[tier] >= size {
			return tier
		}
	}
	return tpZoneTier + 1
}

// capacityNow counts the free 1-CPU slots of every HyperNode from the pods bound now.
func capacityNow(b *testing.B, cs kubernetes.Interface, t tpTree) capacity {
	l, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		b.Fatal(err)
	}
	usedMilli, usedPods := make([]int64, t.nodes), make([]int, t.nodes)
	for _, p := range l.Items {
		i := t.index(p.Spec.NodeName)
		if i < 0 || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		usedPods[i]++
		for _, c := range p.Spec.Containers {
			usedMilli[i] += c.Resources.Requests.Cpu().MilliValue()
		}
	}
	racks, spines := make([]int, t.racks()), make([]int, t.spines())
	zone := 0
	for i := 0; i < t.nodes; i++ {
		free := min(int((tpNodeCPU*1000-usedMilli[i])/1000), tpNodePods-usedPods[i])
		free = max(free, 0)
		racks[i/tpRack] += free
		spines[i/(tpRack*tpSpine)] += free
		zone += free
	}
	var c capacity
	c[1], c[2], c[3] = maxOf(racks), maxOf(spines), zone
	return c
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

type tpGang struct {
	name string
	size int
}

// tpWorkload is tpRounds gangs of each size in a fixed shuffled order, named in creation order.
func tpWorkload() []tpGang {
	sizes := shuffledSizes(tpRounds)
	out := make([]tpGang, len(sizes))
	for i, s := range sizes {
		out[i] = tpGang{name: fmt.Sprintf("g%03d-%d", i, s), size: s}
	}
	return out
}

// tpResult is one or more workloads of one profile.
type tpResult struct {
	pods       int
	elapsed    time.Duration
	gangs      int
	lowest     int            // gangs entirely in a HyperNode of their lowest feasible tier
	aboveLimit int            // gangs spanning a HyperNode above tpHardTier
	bySize     map[int][2]int // size → {lowest, gangs}
	byTier     map[int]int    // tier of the lowest HyperNode holding the gang → gangs
	leaves     map[int][2]int // size → {racks used, summed over gangs; gangs}
	runs       []float64      // pods/s of each workload
}

func (r *tpResult) add(o tpResult) {
	r.pods += o.pods
	r.elapsed += o.elapsed
	r.gangs += o.gangs
	r.lowest += o.lowest
	r.aboveLimit += o.aboveLimit
	r.runs = append(r.runs, o.runs...)
	if r.bySize == nil {
		r.bySize, r.byTier, r.leaves = map[int][2]int{}, map[int]int{}, map[int][2]int{}
	}
	for s, v := range o.leaves {
		w := r.leaves[s]
		r.leaves[s] = [2]int{w[0] + v[0], w[1] + v[1]}
	}
	for s, v := range o.bySize {
		w := r.bySize[s]
		r.bySize[s] = [2]int{w[0] + v[0], w[1] + v[1]}
	}
	for t, n := range o.byTier {
		r.byTier[t] += n
	}
}

// leavesPerGang is the mean number of racks a gang of the size spans.
func (r tpResult) leavesPerGang(size int) float64 {
	v := r.leaves[size]
	if v[1] == 0 {
		return 0
	}
	return float64(v[0]) / float64(v[1])
}

func (r tpResult) podsPerSec() float64 { return float64(r.pods) / r.elapsed.Seconds() }

func (r tpResult) share() float64 {
	if r.gangs == 0 {
		return 0
	}
	return float64(r.lowest) / float64(r.gangs)
}

type tpRow struct {
	nodes   int
	profile string
	res     tpResult
	ratio   float64 // hyperbatch ÷ default, 0 for the baseline
}

func (r tpRow) describe() string {
	var sizes, tiers []string
	for _, s := range tpGangSizes {
		v := r.res.bySize[s]
		sizes = append(sizes, fmt.Sprintf("%d:%d/%d", s, v[0], v[1]))
	}
	var ts []int
	for t := range r.res.byTier {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		tiers = append(tiers, fmt.Sprintf("t%d:%d", t, r.res.byTier[t]))
	}
	var runs []string
	for _, x := range r.res.runs {
		runs = append(runs, fmt.Sprintf("%.1f", x))
	}
	ratio := "-"
	if r.ratio > 0 {
		ratio = fmt.Sprintf("%.2fx", r.ratio)
	}
	var leaves []string
	for _, s := range tpGangSizes {
		leaves = append(leaves, fmt.Sprintf("%d:%.2f", s, r.res.leavesPerGang(s)))
	}
	return fmt.Sprintf("nodes=%-5d %-10s %5d pods %6.1fs %6.1f pods/s (runs %s) %-5s  lowest feasible tier %3d/%d gangs = %5.1f%% (by size %s; gangs by tier %s; racks per gang by size %s)",
		r.nodes, r.profile, r.res.pods, r.res.elapsed.Seconds(), r.res.podsPerSec(), strings.Join(runs, ", "), ratio, r.res.lowest, r.res.gangs,
		100*r.res.share(), strings.Join(sizes, " "), strings.Join(tiers, " "), strings.Join(leaves, " "))
}

func appendResults(rows []tpRow, setups []string, load0, load1 string) error {
	path := filepath.Join(framework.RepoRoot(), "bench", "results", "scheduler.txt")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n# %s SchedulingThroughput/gangs-8-32-128, %d pods per workload, order default/hyperbatch/hyperbatch/default\n",
		time.Now().UTC().Format(time.RFC3339), rows[0].res.pods/len(rows[0].res.runs))
	fmt.Fprintf(&sb, "# GOMAXPROCS=%d, %s; load average %s at start, %s at end\n", runtime.GOMAXPROCS(0), runtime.Version(), load0, load1)
	fmt.Fprintf(&sb, "# %s\n", strings.Join(setups, "; "))
	fmt.Fprintf(&sb, "# feature gates: default %v; hyperbatch %v\n", benchFeatureGates(defaultName), benchFeatureGates(hbName))
	for _, r := range rows {
		sb.WriteString(r.describe())
		sb.WriteByte('\n')
	}
	_, err = f.WriteString(sb.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func quietKlog(b *testing.B, dir string) {
	_, closeLog, err := framework.LogToFile(dir, "scheduler.log")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeLog)
}

func setupCluster(b *testing.B, cs kubernetes.Interface, env *framework.Env, nodes int) tpTree {
	ctx := context.Background()
	t := tpTree{nodes: nodes}
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(tpNodeCPU, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: *resource.NewQuantity(tpNodePods, resource.DecimalSI)}
	framework.Parallel(b, tpSetupPar, nodes, func(i int) error {
		name := t.nodeName(i)
		return createReadyNode(ctx, cs, name, map[string]string{corev1.LabelHostname: name, "tp-rack": fmt.Sprintf("rack-%d", i/tpRack)}, res, nil)
	})
	framework.Parallel(b, tpSetupPar, t.racks(), func(r int) error {
		return env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tp-rack-%d", r)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{{Type: topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{"tp-rack": fmt.Sprintf("rack-%d", r)}}}}}}})
	})
	var top []topologyv1alpha1.MemberSpec
	for s := 0; s < t.spines(); s++ {
		var ms []topologyv1alpha1.MemberSpec
		for r := s * tpSpine; r < (s+1)*tpSpine; r++ {
			ms = append(ms, exactHyper(fmt.Sprintf("tp-rack-%d", r)))
		}
		if err := env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tp-spine-%d", s)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: ms}}); err != nil {
			b.Fatal(err)
		}
		top = append(top, exactHyper(fmt.Sprintf("tp-spine-%d", s)))
	}
	if err := env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "tp-zone"},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: tpZoneTier, Members: top}}); err != nil {
		b.Fatal(err)
	}
	return t
}

var tpSeq int

func podGroup(ns, name string, size int) *schedulingv1beta1.PodGroup {
	return builders.MakePodGroup(ns, name).MinMember(int32(size)).HardTier(tpHardTier).Obj()
}

func gangPod(ns, name, group, scheduler string) *corev1.Pod {
	return builders.MakeGangPod(ns, name, group, scheduler).Image("registry.example/x").
		Requests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}).Obj()
}

func newNamespace(b *testing.B, cs kubernetes.Interface, prefix string) string {
	tpSeq++
	ns := fmt.Sprintf("%s-%d", prefix, tpSeq)
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return ns
}

// probe waits until the freshly started scheduler binds a one-pod gang (hard tier 1: for the
// hyperbatch profile, its HyperNode tree is built), then deletes it: the clock starts warm.
func probe(b *testing.B, cs kubernetes.Interface, env *framework.Env, scheduler string) {
	ctx := context.Background()
	ns := newNamespace(b, cs, "probe")
	pg := podGroup(ns, "probe", 1)
	pg.Spec.NetworkTopology.HighestTierAllowed = ptr.To(1)
	if err := env.Client.Create(ctx, pg); err != nil {
		b.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, gangPod(ns, "probe", "probe", scheduler), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := waitBound(ctx, cs, ns, 1, 2*time.Minute); err != nil {
		b.Fatalf("%s: probe pod not bound: %v", scheduler, err)
	}
	deletePods(b, cs, ns)
}

// runWorkload creates the gang workload's PodGroups, then its pods (tpCreators in parallel), and
// returns the time from the first pod create until all are bound and where the gangs landed. The
// benchmark timer runs only from the first create until the last pod is bound.
func runWorkload(b *testing.B, cs kubernetes.Interface, env *framework.Env, t tpTree, scheduler string) tpResult {
	ctx := context.Background()
	ns := newNamespace(b, cs, "tp")
	gangs := tpWorkload()
	type podRef struct {
		gang string
		i    int
	}
	var pods []podRef
	for _, g := range gangs {
		if err := env.Client.Create(ctx, podGroup(ns, g.name, g.size)); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < g.size; i++ {
			pods = append(pods, podRef{g.name, i})
		}
	}
	startCap := capacityNow(b, cs, t)
	b.StartTimer()
	start := time.Now()
	bound := make(chan error, 1)
	go func() { bound <- waitBound(ctx, cs, ns, len(pods), 5*time.Minute) }()
	framework.Parallel(b, tpCreators, len(pods), func(i int) error {
		p := pods[i]
		_, err := cs.CoreV1().Pods(ns).Create(ctx, gangPod(ns, fmt.Sprintf("%s-%03d", p.gang, p.i), p.gang, scheduler), metav1.CreateOptions{})
		return err
	})
	err := <-bound
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: pods not all bound after %v: %v", ns, elapsed.Round(time.Second), err)
	}
	res := placement(b, cs, ns, t, gangs, startCap)
	res.pods, res.elapsed = len(pods), elapsed
	res.runs = []float64{float64(len(pods)) / elapsed.Seconds()}
	deletePods(b, cs, ns)
	return res
}

// placement judges every gang: the tier of the lowest HyperNode holding all its bound nodes against
// the lowest tier that could have held it at the start.
func placement(b *testing.B, cs kubernetes.Interface, ns string, t tpTree, gangs []tpGang, startCap capacity) tpResult {
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	nodesOf := map[string][]int{}
	for _, p := range l.Items {
		g := p.Annotations[gang.GroupNameAnnotation]
		nodesOf[g] = append(nodesOf[g], t.index(p.Spec.NodeName))
	}
	res := tpResult{bySize: map[int][2]int{}, byTier: map[int]int{}, leaves: map[int][2]int{}}
	for _, g := range gangs {
		if len(nodesOf[g.name]) != g.size {
			b.Fatalf("gang %s/%s has %d bound pods, want %d", ns, g.name, len(nodesOf[g.name]), g.size)
		}
		racks := map[int]bool{}
		for _, n := range nodesOf[g.name] {
			if n < 0 {
				racks[-1] = true // a node in no rack counts as one more
			} else {
				racks[n/tpRack] = true
			}
		}
		lv := res.leaves[g.size]
		res.leaves[g.size] = [2]int{lv[0] + len(racks), lv[1] + 1}
		got, want := t.lowestTier(nodesOf[g.name]), startCap.feasibleTier(g.size)
		res.gangs++
		res.byTier[got]++
		v := res.bySize[g.size]
		v[1]++
		if got <= want {
			res.lowest++
			v[0]++
		}
		res.bySize[g.size] = v
		if got > tpHardTier {
			res.aboveLimit++
		}
	}
	return res
}

// waitBound waits until n pods of ns are bound, watching bound pods only.
func waitBound(ctx context.Context, cs kubernetes.Interface, ns string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName!="}
	seen := map[string]bool{}
	for ctx.Err() == nil {
		l, err := cs.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, p := range l.Items {
			seen[p.Name] = true
		}
		if len(seen) >= n {
			return nil
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel.FieldSelector, ResourceVersion: l.ResourceVersion})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				seen[p.Name] = true
				if len(seen) >= n {
					w.Stop()
					return nil
				}
			}
		}
		w.Stop() // closed by the server or by the timeout: list again
	}
	return fmt.Errorf("%d of %d pods bound: %w", len(seen), n, ctx.Err())
}

// deletePods deletes the namespace's pods and waits until they are gone (deleteAllPods).
func deletePods(b *testing.B, cs kubernetes.Interface, ns string) {
	if err := deleteAllPods(context.Background(), cs, ns); err != nil {
		b.Fatal(err)
	}
}

// startBenchScheduler runs kube-scheduler (schedulerenv) with one profile: docs/scheduler-config.yaml
// for hyperbatch-scheduler, the stock defaults for default-scheduler.
func startBenchScheduler(b *testing.B, ctx context.Context, cfg *rest.Config, dir, profileName string) <-chan struct{} {
	conf := framework.StockSchedulerConfig()
	if profileName == hbName {
		var err error
		if conf, err = framework.DocumentedSchedulerConfig(); err != nil {
			b.Fatal(err)
		}
	}
	// Same client rate limits for both (the defaults, 50 QPS, would cap the figures at the binding rate).
	conf["clientConnection"] = map[string]any{"qps": 5000, "burst": 5000}
	// No PodGroup lifecycle controller runs here: the scheduler alone is measured.
	_, done, err := schedulerenv.Run(ctx, cfg, dir, schedulerenv.Options{
		Config: conf, WithoutEnqueueWait: profileName == hbName, Profile: profileName, ConfigName: profileName + ".yaml",
		FeatureGates: benchFeatureGates(profileName),
	})
	if err != nil {
		b.Fatal(err)
	}
	return done
}

// benchFeatureGates: the stock profile runs with kube-scheduler's default gates (the gates this process
// sets for hyperbatch-scheduler, named at their upstream defaults); hyperbatch-scheduler with the
// shipped ones (localproc.SchedulerFeatureGates), or, with HB_BENCH_HB_GATES=upstream, with the
// upstream defaults too (what the shipped gates save).
func benchFeatureGates(profileName string) map[string]bool {
	gates := localproc.SchedulerFeatureGateMap()
	if profileName == hbName && os.Getenv("HB_BENCH_HB_GATES") != "upstream" {
		return gates
	}
	for name := range gates {
		gates[name] = utilfeature.DefaultMutableFeatureGate.GetAll()[featuregate.Feature(name)].Default
	}
	return gates
}

// shuffledSizes is rounds of tpGangSizes in one fixed shuffled order.
func shuffledSizes(rounds int) []int {
	var sizes []int
	for r := 0; r < rounds; r++ {
		sizes = append(sizes, tpGangSizes...)
	}
	rng := rand.New(rand.NewSource(7))
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	return sizes
}
