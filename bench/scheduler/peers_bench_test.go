package scheduler

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// The peers benchmark: hyperbatch-scheduler against Volcano's own scheduler (vc-scheduler
// v1.14.0-alpha.0 with the configuration Volcano documents for network-topology-aware scheduling,
// volcano-scheduler.conf next to this file), the same Volcano with the configuration its Helm chart
// ships (gang, no network-topology-aware plugin: framework.VolcanoSchedulerConfig; the control row
// "volcano-gang", same PodGroups), Kueue's Topology Aware Scheduling with the stock kube-scheduler
// (peers_kueue_test.go) and the stock kube-scheduler profile (no gangs, the baseline), on the same
// HyperNode tree (for Kueue: the same tree as node labels), the same workload and in the same control
// plane.
//
// Each scheduler is a process started from bin/ (bin/scheduler for hyperbatch with
// docs/scheduler-config.yaml, and for the stock profile with a default-scheduler-only configuration:
// the same kube-scheduler code (v1.36), its plugins unused; bin/vc-scheduler with
// --enable-metrics=true, Volcano #4729), beside the controller the scheduler needs in a cluster,
// also a process: hyperbatch's manager with its podgroupstatus controller (PodGroup enqueue and
// phases), Volcano's controller-manager (its queue controller opens the Queue; Volcano's scheduler
// enqueues by itself), Kueue's manager and kube-controller-manager's Job controller. The stock
// profile runs alone. CPU and peak RSS count the scheduler and its companion (for Kueue its manager
// and kube-scheduler; the Job controller, which Kueue needs only because its gangs are Jobs, is
// reported apart).
//
// Per size the schedulers run one after another on fresh copies of the workload in the order
// hyperbatch, volcano, volcano-gang, kueue, default and back (ABBA), each with a fresh process
// warmed by one probe gang. Each run ends when every pod is bound or after HB_PEERS_TIMEOUT (default
// 5 minutes), whichever comes first; the run is then judged on one List of its bound pods: a gang
// all of whose members are bound is placed, one with some members bound and others not is partial
// (those members hold nodes the gang cannot use), one with none bound is unplaced (partial gangs
// are unplaced too). The watch of bound pods only times the bindings. Run (bench-run takes the
// shared bench lock):
//
//	bench-run env HB_PEERS_SIZES=1000 HB_PEERS_TIMEOUT=3m make bench-peers
//
// HB_PEERS_SIZES=100 runs a 100-node 3-tier tree only (development); HB_PEERS_SCHEDULERS=a,b runs
// only the named rows (its own results section and picture, so runs of different rows at one size
// are kept apart); HB_PEERS_SUBGROUPS=N splits every gang into sub-groups of N pods, each required
// inside one tier-1 HyperNode (hyperbatch: subGroupPolicy; Kueue: two-level podset slices; the
// pinned Volcano v1.14.0-alpha.0 has no sub-groups, so run it with HB_PEERS_SCHEDULERS=hyperbatch,kueue),
// and reports the share of the placed gangs' sub-groups inside one tier-1 HyperNode; HB_PEERS_PROFILE=30s saves a CPU profile of Kueue's manager over the first
// Kueue run of each size, and of hyperbatch-scheduler over the first hyperbatch run, into the run's log
// directory (kueue-cpu.pprof, scheduler-cpu.pprof); HB_PEERS_LOGS=<dir> keeps every process's log
// (and that profile) under <dir>/<size>/ instead of a temporary directory. Results replace the
// section "scheduler <size>[ <rows>]" of bench/results/peers.txt and the picture
// bench/results/placement-<size>[-<rows>][-subgroups<N>].svg (HB_BENCH_RESULTS=off leaves both alone). SIGINT or
// SIGTERM stops every process the benchmark started (they run in process groups of their own)
// before it exits.

type peerSched struct {
	name, schedulerName string
	gang                bool
}

var peerScheds = []peerSched{
	{"hyperbatch", hbName, true},
	{"volcano", "volcano", true},
	{"volcano-gang", "volcano", true},
	{"kueue", defaultName, true},
	{"default", defaultName, false},
}

// Indexes into peerScheds of the rows the ratio lines compare.
const (
	peerHB, peerVolcano, peerVolcanoGang, peerKueue = 0, 1, 2, 3
)

// peerOrder is the ABBA order of peerScheds indexes.
var peerOrder = []int{0, 1, 2, 3, 4, 4, 3, 2, 1, 0}

const (
	peerCreators = 8    // parallel pod creators
	peerKubeQPS  = 2000 // client QPS and burst of every scheduler: vc-scheduler's default
)

func peerRunTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HB_PEERS_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Minute
}

// peerRun is one workload run of one scheduler.
type peerRun struct {
	pods, boundPods int
	elapsed         time.Duration // first pod create → last pod bound (or the timeout)
	timedOut        bool
	gangs, placed   int
	lowest          int             // placed gangs inside a HyperNode of their lowest feasible tier
	aboveHard       int             // hard gangs above their highestTierAllowed
	partial         int             // gangs with some members bound and others not when the run ended (a quorum List)
	latency         []time.Duration // per gang: PodGroup create → last pod bound (unplaced: → the end of the run, a lower bound)
	spread          []time.Duration // per placed gang: first pod bound → last pod bound
	cpu, compCPU    float64         // scheduler / companion CPU seconds during the workload
	jobCPU          float64         // Kueue's runs: kube-controller-manager's Job controller, CPU seconds
	admit           []time.Duration // Kueue's runs, per placed gang: Job created → Kueue unsuspends it (admitted)
	afterAdmit      []time.Duration // and admitted → last pod bound (pods created, ungated, bound)
	rssKiB          int64           // scheduler + companion peak RSS (VmHWM) at the end of the run
	nodesOf         map[string][]int
	leaves          map[int][2]int // size → {leaf HyperNodes used, summed; gangs}
	subGroups       int            // sub-groups of the placed gangs (HB_PEERS_SUBGROUPS)
	subInRack       int            // of those, the ones whose pods are all inside one tier-1 HyperNode
}

type peerAgg struct{ runs []peerRun }

func (a peerAgg) sum(f func(peerRun) float64) float64 {
	s := 0.0
	for _, r := range a.runs {
		s += f(r)
	}
	return s
}

func (a peerAgg) podsPerSec() float64 {
	return a.sum(func(r peerRun) float64 { return float64(r.boundPods) }) / a.sum(func(r peerRun) float64 { return r.elapsed.Seconds() })
}

func (a peerAgg) lat(q float64) time.Duration {
	return quantile(a.all(func(r peerRun) []time.Duration { return r.latency }), q)
}

func (a peerAgg) all(f func(peerRun) []time.Duration) []time.Duration {
	var out []time.Duration
	for _, r := range a.runs {
		out = append(out, f(r)...)
	}
	return out
}

func (a peerAgg) lowestShare() float64 {
	g := a.sum(func(r peerRun) float64 { return float64(r.gangs) })
	if g == 0 {
		return 0
	}
	return a.sum(func(r peerRun) float64 { return float64(r.lowest) }) / g
}

// subInRackShare is the share of the placed gangs' sub-groups whose pods are all inside one tier-1
// HyperNode (NaN without sub-groups).
func (a peerAgg) subInRackShare() float64 {
	return a.sum(func(r peerRun) float64 { return float64(r.subInRack) }) / a.sum(func(r peerRun) float64 { return float64(r.subGroups) })
}

func (a peerAgg) cpuPer1k() float64 {
	return 1000 * a.sum(func(r peerRun) float64 { return r.cpu }) / a.sum(func(r peerRun) float64 { return float64(r.pods) })
}

func (a peerAgg) compCPUPer1k() float64 {
	return 1000 * a.sum(func(r peerRun) float64 { return r.compCPU }) / a.sum(func(r peerRun) float64 { return float64(r.pods) })
}

func (a peerAgg) rssMiB() float64 {
	m := int64(0)
	for _, r := range a.runs {
		m = max(m, r.rssKiB)
	}
	return float64(m) / 1024
}

func (a peerAgg) rssMiBPer1k() float64 {
	return 1000 * a.rssMiB() / (a.sum(func(r peerRun) float64 { return float64(r.pods) }) / float64(len(a.runs)))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// BenchmarkPeers: see the comment at the top of this file.
func BenchmarkPeers(b *testing.B) {
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
	only := os.Getenv("HB_PEERS_SCHEDULERS") // development: e.g. "hyperbatch,default"
	selected := func(k int) bool { return only == "" || strings.Contains(","+only+",", ","+peerScheds[k].name+",") }
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "vc-scheduler")); err != nil && selected(1) {
		b.Fatalf("vc-scheduler is missing from %s: run 'hack/tools.sh vc-scheduler vc-controller-manager'", framework.AssetsDir())
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kueue-manager")); err != nil && selected(peerKueue) {
		b.Fatalf("bin/kueue-manager is missing: run 'make bench-tools' (hack/tools.sh kueue-manager, hack/crds.sh kueue)")
	}
	vcConf, err := os.ReadFile(filepath.Join(root, "bench", "scheduler", "volcano-scheduler.conf"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tree := range peerTrees() {
		b.Run("size="+tree.label, func(b *testing.B) {
			b.StopTimer()
			begin, load0 := time.Now(), framework.LoadAverage()
			env, cs := startControlPlane(b)
			defer onInterrupt.add(func() { _ = env.Stop() })()
			dir := b.TempDir()
			if keep := os.Getenv("HB_PEERS_LOGS"); keep != "" { // keep the processes' logs and profiles
				dir = filepath.Join(keep, tree.label)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			kc := filepath.Join(dir, "kubeconfig")
			if err := framework.WriteKubeconfig(env.Config, kc); err != nil {
				b.Fatal(err)
			}
			setup := time.Now()
			tree.create(b, cs, env)
			for _, q := range []string{"root", "default"} { // as Volcano's scheduler creates them
				if err := env.Client.Create(context.Background(), &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: q},
					Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(q != "root")}}); err != nil {
					b.Fatal(err)
				}
			}
			p := &peerEnv{b: b, env: env, cs: cs, dir: dir, kc: kc, tree: tree, vcConf: string(vcConf), profiled: map[string]bool{}}
			if selected(peerKueue) {
				if err := p.setupKueue(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			setupTook := time.Since(setup)
			aggs := make([]peerAgg, len(peerScheds))
			for i := 0; i < b.N; i++ {
				for _, k := range peerOrder {
					if !selected(k) {
						continue
					}
					aggs[k].runs = append(aggs[k].runs, p.run(peerScheds[k]))
				}
			}
			for k, s := range peerScheds {
				b.ReportMetric(aggs[k].podsPerSec(), s.name+"-pods/s")
				b.ReportMetric(aggs[k].lat(0.99).Seconds(), s.name+"-p99-s")
			}
			if os.Getenv("HB_BENCH_RESULTS") != "off" {
				rows := ""
				if only != "" {
					rows = " HB_PEERS_SCHEDULERS=" + only
				}
				if sub := peerSubGroupSize(); sub > 0 {
					rows += fmt.Sprintf(" HB_PEERS_SUBGROUPS=%d", sub)
				}
				head := fmt.Sprintf("# %s BenchmarkPeers size %s, GOMAXPROCS=%d, %s; load average %s at start, %s at end (the machine is shared); wall time %s; each run bounded by %s; commit %s\n"+
					"# bench-run env HB_PEERS_SIZES=%s%s HB_PEERS_TIMEOUT=%s make bench-peers\n",
					time.Now().UTC().Format(time.RFC3339), tree.label, runtime.GOMAXPROCS(0), runtime.Version(), load0, framework.LoadAverage(), time.Since(begin).Round(time.Second),
					peerRunTimeout(), sourceCommit(root), tree.sizeArg(), rows, peerRunTimeout())
				if err := framework.WriteResultSection("peers.txt", peerSection(tree, only), head+peerReport(tree, setupTook, aggs)); err != nil {
					b.Errorf("writing bench/results/peers.txt: %v", err)
				}
				if err := writePlacementSVG(tree, only, aggs); err != nil {
					b.Errorf("writing the placement picture: %v", err)
				}
			}
			for k, s := range peerScheds {
				for _, r := range aggs[k].runs {
					if k == peerHB && (r.partial > 0 || r.aboveHard > 0 || r.subInRack < r.subGroups) {
						b.Errorf("%s on %s: %d partial gangs, %d hard gangs above their highestTierAllowed, %d of %d sub-groups outside one tier-1 HyperNode",
							s.name, tree.label, r.partial, r.aboveHard, r.subGroups-r.subInRack, r.subGroups)
					}
				}
			}
		})
	}
}

// sourceCommit is the commit the benchmark's binaries were built from, for the results header:
// the short hash of HEAD, "+changes" when the work tree differs from it outside bench/results (which
// the benchmark itself writes), or "unknown" without git.
func sourceCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if diff, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results").Output(); err == nil && len(strings.TrimSpace(string(diff))) > 0 {
		c += "+changes"
	}
	return c
}

// peerSection is the results section of one size and selection of rows: "scheduler <size>" for every
// row, "scheduler <size> <rows>" for HB_PEERS_SCHEDULERS=<rows>, so runs of different rows at one
// size keep their own tables (each with its run's ratios).
func peerSection(t peerTree, only string) string {
	name := "scheduler " + t.label
	if only != "" {
		name += " " + only
	}
	if sub := peerSubGroupSize(); sub > 0 {
		name += fmt.Sprintf(" subgroups=%d", sub)
	}
	return name
}

// peerEnv is one size's control plane.
type peerEnv struct {
	b      *testing.B
	env    *framework.Env
	cs     kubernetes.Interface
	dir    string
	kc     string
	tree   peerTree
	vcConf string
	seq    int
	// probeNode, when set, is a node outside the tree, tainted probeTaint, where the probe runs.
	probeNode string
	// kueuePprof is the running Kueue manager's pprof address, schedPprof hyperbatch-scheduler's
	// (HB_PEERS_PROFILE only); profiled marks the rows whose profile this size has taken.
	kueuePprof, schedPprof string
	profiled               map[string]bool
}

// peerProfile is HB_PEERS_PROFILE: how long a CPU profile of Kueue's manager and of
// hyperbatch-scheduler to take over the first run of each per size (0: none).
func peerProfile() time.Duration {
	d, err := time.ParseDuration(os.Getenv("HB_PEERS_PROFILE"))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// peerProcs are one run's processes: the scheduler, its companion and (Kueue) the Job controller.
type peerProcs struct {
	sched, comp, jobs *framework.Process
	logDir            string
	// unregister removes the processes from onInterrupt once stop has stopped them.
	unregister []func()
}

// start starts the scheduler s and its companion, each a fresh process, and probes the scheduler.
func (p *peerEnv) start(s peerSched) *peerProcs {
	b := p.b
	p.seq++
	pp := &peerProcs{logDir: filepath.Join(p.dir, fmt.Sprintf("%02d-%s", p.seq, s.name))}
	ctx := context.Background()
	var err error
	switch s.name {
	case "hyperbatch":
		pp.comp, err = p.startManager(ctx, pp.logDir)
	case "volcano", "volcano-gang":
		pp.comp, err = framework.StartVolcanoControllers(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: pp.logDir})
		if err == nil {
			err = p.waitQueueOpen(ctx)
		}
	case "kueue":
		pp.comp, pp.jobs, err = p.startKueue(ctx, pp.logDir)
	}
	if err != nil {
		pp.stop(b)
		b.Fatal(err)
	}
	comp, jobs := pp.comp, pp.jobs
	pp.unregister = append(pp.unregister, onInterrupt.add(func() { stopQuietly(comp, jobs) }))
	if pp.sched, err = p.startScheduler(ctx, s, pp.logDir); err != nil {
		pp.stop(b)
		b.Fatal(err)
	}
	sched := pp.sched
	pp.unregister = append(pp.unregister, onInterrupt.add(func() { stopQuietly(sched) }))
	p.probe(s, pp.sched)
	return pp
}

// stop stops every started process.
func (pp *peerProcs) stop(b *testing.B) {
	for _, remove := range pp.unregister {
		remove()
	}
	for _, pr := range []*framework.Process{pp.sched, pp.comp, pp.jobs} {
		if pr == nil {
			continue
		}
		if err := pr.Stop(); err != nil {
			b.Log(err)
		}
	}
}

// checkAlive fails the benchmark when a process exited during the run.
func (pp *peerProcs) checkAlive(b *testing.B, name string) {
	for _, pr := range []*framework.Process{pp.sched, pp.comp, pp.jobs} {
		if pr != nil && pr.Exited() {
			b.Fatalf("%s: a process exited during the run.\n%s", name, pr.LogTail(30))
		}
	}
}

// cpuOf is a process's CPU seconds so far (0 for none).
func cpuOf(pr *framework.Process) float64 {
	if pr == nil {
		return 0
	}
	return pr.CPUSeconds()
}

// run starts the scheduler (and its companion), probes it, runs the workload and stops both.
func (p *peerEnv) run(s peerSched) peerRun {
	b := p.b
	pp := p.start(s)
	defer pp.stop(b)
	sched, comp, jobs, logDir := pp.sched, pp.comp, pp.jobs, pp.logDir
	var profiled chan struct{}
	if d := peerProfile(); d > 0 && !p.profiled[s.name] {
		switch s.name {
		case "kueue":
			p.profiled[s.name], profiled = true, make(chan struct{})
			go func() {
				defer close(profiled)
				p.saveCPUProfile("Kueue", &http.Client{}, p.kueuePprof, filepath.Join(logDir, "kueue-cpu.pprof"), d)
			}()
		case "hyperbatch":
			p.profiled[s.name], profiled = true, make(chan struct{})
			insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback, a self-signed test server
			go func() {
				defer close(profiled)
				p.saveCPUProfile("hyperbatch-scheduler", insecure, p.schedPprof, filepath.Join(logDir, "scheduler-cpu.pprof"), d)
			}()
		}
	}
	cpu0, ccpu0, jcpu0 := sched.CPUSeconds(), cpuOf(comp), cpuOf(jobs)
	r := p.workload(s, sched)
	r.cpu, r.compCPU, r.jobCPU = sched.CPUSeconds()-cpu0, cpuOf(comp)-ccpu0, cpuOf(jobs)-jcpu0
	r.rssKiB = sched.PeakRSSKiB()
	if comp != nil {
		r.rssKiB += comp.PeakRSSKiB()
	}
	if profiled != nil {
		<-profiled
	}
	if strings.HasPrefix(s.name, "volcano") {
		saveVolcanoMetrics(b, sched, logDir)
	}
	pp.checkAlive(b, s.name)
	subs := ""
	if r.subGroups > 0 {
		subs = fmt.Sprintf(", sub-groups in one tier-1 HyperNode %d/%d", r.subInRack, r.subGroups)
	}
	b.Logf("%-12s %s: %d/%d gangs placed in %.1fs, %.1f pods/s, p50 %.2fs p99 %.2fs, lowest tier %d/%d, partial %d%s, cpu %.1fs (+%.1fs companion, +%.1fs Job controller), peak RSS %.0f MiB; logs in %s",
		s.name, p.tree.label, r.placed, r.gangs, r.elapsed.Seconds(), float64(r.boundPods)/r.elapsed.Seconds(), quantile(r.latency, 0.5).Seconds(),
		quantile(r.latency, 0.99).Seconds(), r.lowest, r.gangs, r.partial, subs, r.cpu, r.compCPU, r.jobCPU, float64(r.rssKiB)/1024, logDir)
	return r
}

func (p *peerEnv) startManager(ctx context.Context, logDir string) (*framework.Process, error) {
	health, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", health)
	return framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: logDir, BinDir: filepath.Join(framework.RepoRoot(), "bin")},
		"manager", []string{"--kubeconfig=" + p.kc, "--controllers=podgroupstatus", "--enable-webhooks=false", "--leader-elect=false",
			"--metrics-bind-address=0", "--health-probe-bind-address=" + addr}, framework.HTTPReady("http://"+addr+"/readyz"))
}

// saveVolcanoMetrics keeps vc-scheduler's /metrics at the end of a run in logDir/vc-scheduler-metrics.txt
// (per action and per plugin latencies: where its time went), best effort. The address is the
// --listen-address on the first line of its log (the command).
func saveVolcanoMetrics(b *testing.B, sched *framework.Process, logDir string) {
	f, err := os.ReadFile(sched.LogPath)
	if err != nil {
		b.Logf("vc-scheduler metrics: %v", err)
		return
	}
	first, _, _ := strings.Cut(string(f), "\n")
	_, addr, ok := strings.Cut(first, "--listen-address=")
	if !ok {
		b.Logf("vc-scheduler metrics: no --listen-address in %q", first)
		return
	}
	addr, _, _ = strings.Cut(addr, " ")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		b.Logf("vc-scheduler metrics: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(filepath.Join(logDir, "vc-scheduler-metrics.txt"), out, 0o600)
	}
	if err != nil {
		b.Logf("vc-scheduler metrics: %v", err)
	}
}

// waitQueueOpen waits until Volcano's queue controller has opened the default Queue (proportion
// enqueues nothing into a Queue that is not Open).
func (p *peerEnv) waitQueueOpen(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var q schedulingv1beta1.Queue
		err := p.env.Client.Get(ctx, client.ObjectKey{Name: "default"}, &q)
		return err == nil && q.Status.State == schedulingv1beta1.QueueStateOpen, nil
	})
}

// startScheduler starts the scheduler process with the client QPS and burst peerKubeQPS.
func (p *peerEnv) startScheduler(ctx context.Context, s peerSched, logDir string) (*framework.Process, error) {
	if s.name == "volcano" || s.name == "volcano-gang" {
		conf := p.vcConf // the documented network-topology-aware configuration
		if s.name == "volcano-gang" {
			conf = framework.VolcanoSchedulerConfig // the Helm chart's: gang, no network-topology-aware
		}
		return framework.StartVolcanoScheduler(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: logDir, SchedulerConf: conf,
			ExtraArgs: []string{fmt.Sprintf("--kube-api-qps=%d", peerKubeQPS), fmt.Sprintf("--kube-api-burst=%d", peerKubeQPS)}})
	}
	conf := framework.StockSchedulerConfig()
	if s.name == "hyperbatch" {
		var err error
		if conf, err = framework.DocumentedSchedulerConfig(); err != nil {
			return nil, err
		}
	}
	conf["clientConnection"] = map[string]any{"kubeconfig": p.kc, "qps": peerKubeQPS, "burst": peerKubeQPS}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(logDir, "scheduler-config.json")
	out, _ := json.Marshal(conf)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	insecure := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check of a self-signed test server
	args := []string{"--config=" + path, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--v=1"}
	if s.name == "hyperbatch" && peerProfile() > 0 {
		// kube-scheduler serves /debug/pprof on its secure port (--profiling, on by default) to
		// authorized callers only; with no authorization kubeconfig here, only the paths it always
		// allows are reachable, so the profile's path is added to them.
		args = append(args, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*")
		p.schedPprof = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	return framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: logDir, BinDir: filepath.Join(framework.RepoRoot(), "bin")},
		"scheduler", args, framework.HTTPReadyWith(insecure, url))
}

func peerPodGroup(ns string, g peerGang) *schedulingv1beta1.PodGroup {
	pg := builders.MakePodGroup(ns, g.name).MinMember(int32(g.size)).Queue("default").HardTier(g.tier)
	if g.soft {
		pg.SoftTopology()
	}
	o := pg.Obj()
	if g.sub > 0 {
		// Each sub-group of g.sub pods (the pods' sub-group label) hard inside one tier-1 HyperNode.
		o.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "sg", SubGroupSize: ptr.To(int32(g.sub)),
			MatchLabelKeys: []string{peerSubGroupLabel}, NetworkTopology: builders.HardTier(1)}}
	}
	return o
}

func peerPod(ns, name, group, scheduler string) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return builders.MakeGangPod(ns, name, group, scheduler).Image("registry.example/x").Requests(req).Limits(req).Obj()
}

// probe waits until the fresh scheduler binds a one-pod hard tier-1 gang (for Kueue a one-pod Job
// through its webhooks, admission and ungating), then removes it. With probeNode set (the tree is
// full), the probe is a gang without network topology on that node, which only it tolerates.
func (p *peerEnv) probe(s peerSched, sched *framework.Process) {
	b, ctx := p.b, context.Background()
	ns := newNamespace(b, p.cs, "probe")
	g := peerGang{name: "probe", size: 1, tier: 1}
	if s.name == "kueue" {
		if err := p.kueueLocalQueue(ctx, ns); err != nil {
			b.Fatal(err)
		}
		if err := p.env.Client.Create(ctx, p.kueueJob(ns, g)); err != nil {
			b.Fatal(err)
		}
	} else {
		pg, pod := peerPodGroup(ns, g), peerPod(ns, "probe", "probe", s.schedulerName)
		if p.probeNode != "" { // the tree is full: the probe runs on the node kept for it
			pg.Spec.NetworkTopology = nil
			pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: p.probeNode}
			pod.Spec.Tolerations = []corev1.Toleration{{Key: probeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
		if err := p.env.Client.Create(ctx, pg); err != nil {
			b.Fatal(err)
		}
		if _, err := p.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	if err := waitBound(ctx, p.cs, ns, 1, 3*time.Minute); err != nil {
		b.Fatalf("%s: probe pod not bound: %v\n%s", s.name, err, sched.LogTail(30))
	}
	p.cleanup(s, ns)
}

// cleanup deletes a namespace's pods and PodGroups, or Kueue's Jobs, pods and Workloads (no namespace
// controller runs here).
func (p *peerEnv) cleanup(s peerSched, ns string) {
	if s.name == "kueue" {
		p.kueueCleanup(ns)
		return
	}
	deletePods(p.b, p.cs, ns)
	if err := retrying(context.Background(), "deleting the PodGroups of namespace "+ns, func(ctx context.Context) error {
		return p.env.Client.DeleteAllOf(ctx, &schedulingv1beta1.PodGroup{}, client.InNamespace(ns))
	}); err != nil {
		p.b.Fatal(err)
	}
}

// boundState follows the workload's pods through a watch of bound pods.
// It times the bindings (when the watch saw each pod bound); which members ended up bound, and where,
// comes from one List at the end of the run (finalBound).
type boundState struct {
	mu          sync.Mutex
	bound       map[string]int // gang → pods bound
	first, last map[string]time.Time
	seen        map[string]bool
	total, n    int
	done        chan struct{}
}

func (s *boundState) add(pod *corev1.Pod, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[pod.Name] || pod.Spec.NodeName == "" {
		return
	}
	s.seen[pod.Name] = true
	g := pod.Annotations[gang.GroupNameAnnotation]
	if s.bound[g] == 0 {
		s.first[g] = at
	}
	s.bound[g]++
	s.last[g] = at
	s.n++
	if s.n == s.total {
		close(s.done)
	}
}

// retryAfterError waits before a failed list or watch is retried, and no longer than ctx lasts.
func retryAfterError(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// follow watches the namespace's bound pods until ctx ends.
func (s *boundState) follow(ctx context.Context, cs kubernetes.Interface, ns string) {
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName!="}
	for ctx.Err() == nil {
		l, err := cs.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		now := time.Now()
		for i := range l.Items {
			s.add(&l.Items[i], now)
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel.FieldSelector, ResourceVersion: l.ResourceVersion})
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				s.add(pod, time.Now())
			}
		}
		w.Stop()
	}
}

// finalPlacement is where a run's pods were bound when it ended.
type finalPlacement struct {
	at    time.Time        // when the List was read
	nodes map[string][]int // gang → the tree indexes of its bound members' nodes
	pods  int              // bound pods
	// index is, per gang, each bound member's node (tree index) by the member's index in the gang
	// (memberIndex).
	index map[string]map[int]int
}

// finalBound lists the namespace's pods once (a quorum read, after the run's watch stopped): the
// positive record of which members of each gang are bound, and where, that the run is judged on.
func finalBound(cs kubernetes.Interface, t peerTree, ns string) (finalPlacement, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		return finalPlacement{}, fmt.Errorf("listing the bound pods of %s at the end of the run: %w", ns, err)
	}
	f := finalPlacement{at: time.Now(), nodes: map[string][]int{}, index: map[string]map[int]int{}}
	for i := range l.Items {
		pod := &l.Items[i]
		g := pod.Annotations[gang.GroupNameAnnotation]
		node := t.index(pod.Spec.NodeName)
		f.nodes[g] = append(f.nodes[g], node)
		f.pods++
		if f.index[g] == nil {
			f.index[g] = map[int]int{}
		}
		if ix, ok := memberIndex(pod, g); ok {
			f.index[g][ix] = node
		}
	}
	return f, nil
}

// memberIndex is a bound pod's index in its gang: the completion index of a Kueue run's Job pod,
// or the suffix of the name peerPod gave it (<gang>-<i>).
func memberIndex(pod *corev1.Pod, gangName string) (int, bool) {
	if v, ok := pod.Labels[batchv1.JobCompletionIndexAnnotation]; ok {
		var i int
		_, err := fmt.Sscanf(v, "%d", &i)
		return i, err == nil
	}
	var i int
	_, err := fmt.Sscanf(strings.TrimPrefix(pod.Name, gangName+"-"), "%d", &i)
	return i, err == nil
}

// workload submits the gangs in order (PodGroup, then its pods through peerCreators creators),
// follows their bindings and judges where they landed.
func (p *peerEnv) workload(s peerSched, sched *framework.Process) peerRun {
	b := p.b
	ns := newNamespace(b, p.cs, "peers-"+s.name)
	gangs := peerWorkload(p.tree)
	st := &boundState{bound: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{},
		seen: map[string]bool{}, done: make(chan struct{})}
	for _, g := range gangs {
		st.total += g.size
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var admitted *kueueAdmissions
	if s.name == "kueue" {
		if err := p.kueueLocalQueue(ctx, ns); err != nil {
			b.Fatal(err)
		}
		admitted = &kueueAdmissions{at: map[string]time.Time{}}
		go admitted.follow(ctx, p.cs, ns)
	}
	go st.follow(ctx, p.cs, ns)
	created := make(map[string]time.Time, len(gangs))
	type podRef struct {
		gang   string
		i, sub int
	}
	work := make(chan podRef, 256)
	errs := make(chan error, peerCreators+1)
	var wg sync.WaitGroup
	for w := 0; w < peerCreators; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				pod := peerPod(ns, fmt.Sprintf("%s-%03d", r.gang, r.i), r.gang, s.schedulerName)
				if r.sub > 0 {
					if pod.Labels == nil {
						pod.Labels = map[string]string{}
					}
					pod.Labels[peerSubGroupLabel] = fmt.Sprint(r.i / r.sub)
				}
				if _, err := p.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	start := time.Now()
	for _, g := range gangs {
		created[g.name] = time.Now()
		if s.name == "kueue" { // the Job controller creates the pods
			if err := p.env.Client.Create(ctx, p.kueueJob(ns, g)); err != nil {
				errs <- err
				break
			}
			continue
		}
		if err := p.env.Client.Create(ctx, peerPodGroup(ns, g)); err != nil {
			errs <- err
			break
		}
		for i := 0; i < g.size; i++ {
			work <- podRef{g.name, i, g.sub}
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("%s: creating the workload: %v", s.name, err)
	default:
	}
	r := peerRun{gangs: len(gangs), pods: st.total, nodesOf: map[string][]int{}, leaves: map[int][2]int{}}
	select {
	case <-st.done:
	case <-time.After(peerRunTimeout() - time.Since(start)):
		r.timedOut = true
	}
	cancel()
	final, err := finalBound(p.cs, p.tree, ns)
	if err != nil {
		b.Fatalf("%s: %v", s.name, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	end := start
	for _, g := range gangs {
		if st.bound[g.name] > 0 && st.last[g.name].After(end) {
			end = st.last[g.name]
		}
	}
	if r.timedOut {
		end = final.at
		b.Logf("%s: %d of %d pods bound after %s; the run counts as %s long.\n%s", s.name, final.pods, st.total, peerRunTimeout(), end.Sub(start).Round(time.Second), sched.LogTail(15))
	}
	r.elapsed, r.boundPods = end.Sub(start), final.pods
	startCap := p.tree.emptyTier // every run starts on empty nodes (the previous run's pods are deleted)
	for _, g := range gangs {
		nodes := final.nodes[g.name]
		r.nodesOf[g.name] = nodes
		if len(nodes) < g.size {
			// Not placed when the run ended: its time to placement is at least this long. A gang
			// with members bound and others not is partial: they hold nodes the gang cannot use.
			if len(nodes) > 0 {
				r.partial++
			}
			r.latency = append(r.latency, end.Sub(created[g.name]))
			continue
		}
		r.placed++
		last := st.last[g.name]
		if st.bound[g.name] < g.size { // bound by the List's time, before the watch told
			last = final.at
		}
		r.latency = append(r.latency, last.Sub(created[g.name]))
		if at, ok := admitted.get(g.name); ok {
			r.admit = append(r.admit, at.Sub(created[g.name]))
			r.afterAdmit = append(r.afterAdmit, last.Sub(at))
		}
		first := st.first[g.name]
		if st.bound[g.name] == 0 {
			first = last
		}
		r.spread = append(r.spread, last.Sub(first))
		got := p.tree.lowestTier(nodes)
		if got <= startCap(g.size) {
			r.lowest++
		}
		if !g.soft && got > g.tier {
			r.aboveHard++
		}
		leaves := map[int]bool{}
		for _, n := range nodes {
			leaves[n/p.tree.span(1)] = true
		}
		v := r.leaves[g.size]
		r.leaves[g.size] = [2]int{v[0] + len(leaves), v[1] + 1}
		if g.sub > 0 {
			// Sub-group k is members k*sub … (k+1)*sub-1 (hyperbatch's sub-group label; Kueue's
			// slices of consecutive completion indexes).
			racks := map[int]map[int]bool{}
			for ix, n := range final.index[g.name] {
				if racks[ix/g.sub] == nil {
					racks[ix/g.sub] = map[int]bool{}
				}
				racks[ix/g.sub][n/p.tree.span(1)] = true
			}
			for k := 0; k < g.size/g.sub; k++ {
				r.subGroups++
				if len(racks[k]) == 1 {
					r.subInRack++
				}
			}
		}
	}
	p.cleanup(s, ns)
	return r
}

// peerReport is one size's section: a row per scheduler and the ratio table.
func peerReport(t peerTree, setup time.Duration, aggs []peerAgg) string {
	var sb strings.Builder
	gangs := peerWorkload(t)
	pods, soft := 0, 0
	for _, g := range gangs {
		pods += g.size
		if g.soft {
			soft++
		}
	}
	fmt.Fprintf(&sb, "## size %s: %d nodes (8 CPU each), %d HyperNodes in %d tiers (setup %s); workload %d gangs (%d soft), %d pods of 1 CPU; runs in the order %s\n",
		t.label, t.nodes, t.hyperNodes(), t.tiers(), setup.Round(time.Second), len(gangs), soft, pods, orderNames(aggs))
	if sub := peerSubGroupSize(); sub > 0 {
		subs := 0
		for _, g := range gangs {
			subs += g.size / g.sub
		}
		fmt.Fprintf(&sb, "## sub-groups: every gang split into %d sub-groups of %d pods (a gang of fewer pods is one), each required inside one tier-1 HyperNode of %d nodes (%d pods); "+
			"hyperbatch: PodGroup subGroupPolicy (matchLabelKeys on the pods' index / %d, networkTopology hard, highestTierAllowed 1); kueue: the Job's pod template "+
			"kueue.x-k8s.io/podset-slice-required-topology %s and podset-slice-size (consecutive completion indexes)\n",
			subs, sub, t.span(1), t.span(1)*t.peerSlots, sub, t.levelLabel(1))
	}
	fmt.Fprintf(&sb, "%-12s %9s %8s %8s %9s %8s %8s %12s %12s %10s %12s  %s\n", "scheduler", "pods/s", "p50-s", "p99-s", "lowest-%", "partial", "unplaced",
		"cpu-s/1kpod", "comp-cpu/1k", "rss-MiB", "rss-MiB/1k", "bind spread p99 / racks per gang by size / runs pods/s")
	for k, s := range peerScheds {
		a := aggs[k]
		if len(a.runs) == 0 {
			continue
		}
		var runs, leaves []string
		unplaced, partial := 0, 0
		for _, r := range a.runs {
			runs = append(runs, fmt.Sprintf("%.1f", float64(r.boundPods)/r.elapsed.Seconds()))
			unplaced += r.gangs - r.placed
			partial += r.partial
		}
		for _, size := range tpGangSizes {
			used, n := 0, 0
			for _, r := range a.runs {
				used += r.leaves[size][0]
				n += r.leaves[size][1]
			}
			if n > 0 {
				leaves = append(leaves, fmt.Sprintf("%d:%.2f", size, float64(used)/float64(n)))
			}
		}
		fmt.Fprintf(&sb, "%-12s %9.1f %8.2f %8.2f %9.1f %8d %8d %12.2f %12.2f %10.0f %12.1f  %.2fs / %s / %s\n", s.name, a.podsPerSec(), a.lat(0.5).Seconds(), a.lat(0.99).Seconds(),
			100*a.lowestShare(), partial, unplaced, a.cpuPer1k(), a.compCPUPer1k(), a.rssMiB(), a.rssMiBPer1k(),
			quantile(a.all(func(r peerRun) []time.Duration { return r.spread }), 0.99).Seconds(), strings.Join(leaves, " "), strings.Join(runs, ", "))
	}
	div := func(x, y float64) string {
		if y == 0 || math.IsNaN(y) || math.IsNaN(x) {
			return "-"
		}
		return fmt.Sprintf("%.2fx", x/y)
	}
	partial := func(a peerAgg) int { return int(a.sum(func(r peerRun) float64 { return float64(r.partial) })) }
	if peerSubGroupSize() > 0 {
		for k, s := range peerScheds {
			a := aggs[k]
			if len(a.runs) == 0 {
				continue
			}
			fmt.Fprintf(&sb, "sub-groups %-12s %.1f%% inside one tier-1 HyperNode (%d of %d sub-groups of the placed gangs, over %d runs)\n", s.name, 100*a.subInRackShare(),
				int(a.sum(func(r peerRun) float64 { return float64(r.subInRack) })), int(a.sum(func(r peerRun) float64 { return float64(r.subGroups) })), len(a.runs))
		}
	}
	h := aggs[peerHB]
	for _, k := range []int{peerVolcano, peerKueue} {
		v := aggs[k]
		if len(h.runs) == 0 || len(v.runs) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "ratio hyperbatch/%s (%s): pods/s %s (goal >= 1.0x), p50 %s, p99 %s (goal <= 1.0x), lowest tier %.1f%% vs %.1f%% (goal 100%%), partial gangs %d vs %d (goal 0), cpu/1k pods %s (with companions %s), peak RSS %s\n",
			peerScheds[k].name, t.label, div(h.podsPerSec(), v.podsPerSec()), div(h.lat(0.5).Seconds(), v.lat(0.5).Seconds()), div(h.lat(0.99).Seconds(), v.lat(0.99).Seconds()),
			100*h.lowestShare(), 100*v.lowestShare(), partial(h), partial(v),
			div(h.cpuPer1k(), v.cpuPer1k()), div(h.cpuPer1k()+h.compCPUPer1k(), v.cpuPer1k()+v.compCPUPer1k()), div(h.rssMiB(), v.rssMiB()))
	}
	if v, c := aggs[peerVolcano], aggs[peerVolcanoGang]; len(v.runs) > 0 && len(c.runs) > 0 {
		fmt.Fprintf(&sb, "control volcano/volcano-gang (%s): pods/s %s, p99 %s, cpu/1k pods %s (the same vc-scheduler and PodGroups; volcano-gang runs the Helm chart's configuration, without network-topology-aware)\n",
			t.label, div(v.podsPerSec(), c.podsPerSec()), div(v.lat(0.99).Seconds(), c.lat(0.99).Seconds()), div(v.cpuPer1k(), c.cpuPer1k()))
	}
	if kq := aggs[peerKueue]; len(kq.runs) > 0 {
		fmt.Fprintf(&sb, "kueue: Job created -> admitted (Kueue unsuspends it) p50 %.2fs p99 %.2fs; admitted -> last pod bound (Job controller creates the pods, Kueue ungates them, kube-scheduler binds) p50 %.2fs p99 %.2fs; kube-controller-manager's Job controller (not in the row) %.2f cpu-s/1kpod\n",
			quantile(kq.all(func(r peerRun) []time.Duration { return r.admit }), 0.5).Seconds(), quantile(kq.all(func(r peerRun) []time.Duration { return r.admit }), 0.99).Seconds(),
			quantile(kq.all(func(r peerRun) []time.Duration { return r.afterAdmit }), 0.5).Seconds(), quantile(kq.all(func(r peerRun) []time.Duration { return r.afterAdmit }), 0.99).Seconds(),
			1000*kq.sum(func(r peerRun) float64 { return r.jobCPU })/kq.sum(func(r peerRun) float64 { return float64(r.pods) }))
	}
	return sb.String()
}

// orderNames is the order the rows ran in (those with runs: HB_PEERS_SCHEDULERS may leave some out).
func orderNames(aggs []peerAgg) string {
	var out []string
	for _, k := range peerOrder {
		if len(aggs[k].runs) > 0 {
			out = append(out, peerScheds[k].name)
		}
	}
	return strings.Join(out, ", ")
}
