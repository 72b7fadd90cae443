package webhook_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// workloadPods is the size of each workload of BenchmarkAdmissionWorkloads (HYPERBATCH_BENCH_WORKLOAD_PODS
// overrides it for a smoke run, which writes no results).
const workloadPods = 2000

// warmUpRounds are the uncounted rounds of each kind before its counted ones.
const warmUpRounds = 3

// setupNoGate is hyperbatch's webhooks without the JobSet PodGroup gate entry
// (jobset-pod.validate.hyperbatch.dev): the least webhook mode costs a JobSet's pods.
const setupNoGate burstSetup = "webhook-nogate"

// setupNoopGate is webhook-nogate with a no-op validating webhook (the bench's noopPath) in the
// gate's place, selecting the same pods: what one validating call per JobSet pod costs at least.
const setupNoopGate burstSetup = "webhook-noopgate"

// The controllers' client rate limits in BenchmarkAdmissionWorkloads. Their defaults (Volcano's
// controller-manager 50 QPS, burst 100; kube-controller-manager 20, 30) would bound a 2,000-pod
// workload at 40 to 100 s whatever admission costs; raised, the apiserver is the bound, so the
// rounds see what admission adds.
var controllerQPS = []string{"--kube-api-qps=5000", "--kube-api-burst=5000"}

// volcanoEnqueueConfig is Volcano's chart configuration (framework.VolcanoSchedulerConfig) with its
// enqueue action alone: vc-scheduler moves a Job's PodGroup to Inqueue, which lets Volcano's job
// controller create the pods, and binds none of them, so the rounds measure creation only.
var volcanoEnqueueConfig = strings.Replace(framework.VolcanoSchedulerConfig, `actions: "enqueue, allocate, backfill"`, `actions: "enqueue"`, 1)

// BenchmarkAdmissionWorkloads measures how long a workload controller takes to create a
// workload's pods in the governed bench namespace under hyperbatch's admission set-ups: from the
// workload's CREATE until a watch on its pods has seen all workloadPods of them ADDED, with the
// apiserver's CPU time per pod over the same span. The controllers are the real ones:
//   - a Volcano Job (one task of 2,000 replicas, minAvailable 2,000) made into pods by Volcano's
//     vc-controller-manager (its job controller), once vc-scheduler (chart configuration, enqueue
//     action only) has put the Job's PodGroup Inqueue against four Ready nodes. The pods are
//     hyperbatch-scheduler's, which does not run: nothing binds or touches them (benchVolcanoJob);
//   - a JobSet (4 replicated Jobs of 500) made into Jobs by jobset-controller (with its own
//     webhooks, as its install has them) and into pods by kube-controller-manager's Job controller.
//     It is a gang: its PodGroup is created before it in every set-up, as controllers/podgroup
//     (which does not run here) would, so in webhook and policy mode each pod passes the PodGroup
//     gate with one call. (A JobSet that is no gang makes no gate call at all, like webhook-nogate.)
//
// Set-ups, after warmUpRounds uncounted rounds under none, in the mirrored order none, webhook, policy, policy,
// webhook, none, twice (HYPERBATCH_BENCH_WORKLOAD_REPEATS times; JobSet rounds also run
// webhook-nogate and webhook-noopgate, after webhook). The ratios are given by means and by medians:
//   - none: no hyperbatch admission at all (no webhook configuration, no policy). Volcano's own
//     webhook-manager is not run: the Job names its queue, scheduler and minAvailable, and
//     Volcano's chart registers no webhook for a Job's pods;
//   - webhook: hyperbatch's webhook configurations (--admission=webhook);
//   - policy: the admission policies with the webhook configurations policy mode keeps for the
//     kinds they do not cover (--admission=policy);
//   - webhook-nogate: webhook without the PodGroup gate entry, the floor of a JobSet's pods in
//     webhook mode (each of them makes one gate call otherwise);
//   - webhook-noopgate: webhook-nogate with a no-op validating webhook in the gate's place (same
//     rules and selectors): the floor of one validating call per JobSet pod.
//
// Each round checks hyperbatch_webhook_admission_requests_total: no Pod webhook call for the
// controllers' pods, and one gate call per JobSet pod exactly where the gate is installed.
// Results: the workloads section of bench/results/admission.txt.
func BenchmarkAdmissionWorkloads(b *testing.B) {
	n := workloadPods
	partial := false
	repeats := 2
	if v, err := strconv.Atoi(os.Getenv("HYPERBATCH_BENCH_WORKLOAD_REPEATS")); err == nil && v > 0 {
		repeats = v
	}
	if v, err := strconv.Atoi(os.Getenv("HYPERBATCH_BENCH_WORKLOAD_PODS")); err == nil && v > 0 {
		n, partial = v, true
	}
	if n%4 != 0 {
		b.Fatalf("HYPERBATCH_BENCH_WORKLOAD_PODS=%d: the JobSet's 4 Jobs need a multiple of 4", n)
	}
	c, mwc, vwc := burstClient(b)
	apiserver, err := childProcess("kube-apiserver")
	if err != nil {
		b.Fatal(err)
	}
	cfg := *w.Config
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	startWorkloadControllers(b)

	policyMWC, policyVWC := policyModeConfigurations(mwc, vwc)
	noGateMWC, noGateVWC := renamed(mwc, "-nogate"), renamed(vwc, "-nogate")
	noGateVWC.Webhooks = slices.DeleteFunc(noGateVWC.Webhooks, func(e admissionregistrationv1.ValidatingWebhook) bool {
		return e.Name == hbwebhook.JobSetPodGateEntryName
	})
	setups := map[burstSetup][]client.Object{
		setupHyperbatch: {mwc, vwc},
		setupPolicy: append(admissionpolicy.Objects(admissionpolicy.Options{Excluded: []string{hbwebhook.DefaultNamespace}}),
			policyMWC, policyVWC),
		setupNoGate:   {noGateMWC, noGateVWC},
		setupNoopGate: {renamed(noGateMWC, "-noop"), renamed(noGateVWC, "-noop"), noopGateConfiguration(vwc)},
	}
	kinds := []workloadKind{volcanoJobKind, jobSetKind}
	if only := os.Getenv("HYPERBATCH_BENCH_WORKLOADS"); only != "" { // e.g. "jobset": those kinds only, no results written
		kinds, partial = nil, true
		for _, k := range strings.Split(only, ",") {
			kinds = append(kinds, workloadKind(k))
		}
	}
	half := map[workloadKind][]burstSetup{
		volcanoJobKind: {setupNone, setupHyperbatch, setupPolicy},
		jobSetKind:     {setupNone, setupHyperbatch, setupNoGate, setupNoopGate, setupPolicy},
	}
	type round struct {
		elapsed, first time.Duration
		cpuPerPod      time.Duration
	}
	for iter := 0; iter < b.N; iter++ {
		loadAtStart := framework.LoadAverage()
		rounds := map[workloadKind]map[burstSetup][]round{}
		var orders, warmUps []string
		for _, kind := range kinds {
			rounds[kind] = map[burstSetup][]round{}
			// ABBA repeats times (twice unless HYPERBATCH_BENCH_WORKLOAD_REPEATS says): a round's
			// time varies by a fifth or more from one round to the next.
			abba := append(slices.Clone(half[kind]), half[kind]...)
			slices.Reverse(abba[len(half[kind]):])
			var order []burstSetup
			for range repeats {
				order = append(order, abba...)
			}
			orders = append(orders, fmt.Sprintf("%s: %s", kind, strings.ReplaceAll(joinSetups(order), string(setupHyperbatch), modeName(setupHyperbatch))))
			// Rounds first that are not counted: the first workloads of a kind are slower (a
			// Volcano Job's first counted round after one warm-up still took 1.3-1.5x the later
			// ones, which the mirrored order does not cancel).
			useSetup(b, c, setups, setupNone, fmt.Sprintf("wl-%d-%s-warm", iter, kind))
			waitForGate(b, c, setupNone, fmt.Sprintf("wl-%d-%s-warm", iter, kind))
			var warmed []string
			for k := range warmUpRounds {
				warm := workloadRound(b, c, cs, apiserver, kind, setupNone, fmt.Sprintf("%s-%d-warm%d", kind, iter, k), n)
				warmed = append(warmed, fmt.Sprintf("%.2f s", warm.elapsed.Seconds()))
			}
			warmUps = append(warmUps, fmt.Sprintf("%s %s", kind, strings.Join(warmed, ", ")))
			fmt.Printf("warm-up %s\n", warmUps[len(warmUps)-1])
			for i, setup := range order {
				tag := fmt.Sprintf("wl-%d-%s-%d", iter, kind, i)
				useWorkloadSetup(b, c, setups, setup, tag)
				waitForGate(b, c, setup, tag)
				r := workloadRound(b, c, cs, apiserver, kind, setup, fmt.Sprintf("%s-%d-%d", kind, iter, i), n)
				rounds[kind][setup] = append(rounds[kind][setup], round{elapsed: r.elapsed, first: r.first, cpuPerPod: r.cpu / time.Duration(n)})
				fmt.Printf("round %s %-16s %d pods in %v (first at %v), apiserver %v/pod\n", kind, modeName(setup), n, r.elapsed.Round(time.Millisecond),
					r.first.Round(time.Millisecond), (r.cpu / time.Duration(n)).Round(time.Microsecond))
			}
		}
		useSetup(b, c, setups, setupHyperbatch, fmt.Sprintf("wl-%d-end", iter))
		avg := func(kind workloadKind, s burstSetup) round {
			var out round
			rs := rounds[kind][s]
			for _, r := range rs {
				out.elapsed += r.elapsed / time.Duration(len(rs))
				out.first += r.first / time.Duration(len(rs))
				out.cpuPerPod += r.cpuPerPod / time.Duration(len(rs))
			}
			return out
		}
		// med: a set-up's median round time. Single rounds vary by up to 2.5x on a shared machine,
		// and one slow round moves a mean of four by a third of that.
		med := func(kind workloadKind, s burstSetup) time.Duration {
			var ds []time.Duration
			for _, r := range rounds[kind][s] {
				ds = append(ds, r.elapsed)
			}
			return medianOf(ds)
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "# %s BenchmarkAdmissionWorkloads, GOMAXPROCS=%d, %s, one Volcano Job and one JobSet of %d pods per round in the governed bench namespace, created by the real controllers "+
			"(vc-controller-manager after vc-scheduler's enqueue; jobset-controller and kube-controller-manager's Job controller; client limits %s); time from the workload's CREATE to its last pod ADDED on a watch; "+
			"rounds in the order %s after %d uncounted warm-up rounds under none (each set-up's figures are the mean of its %d rounds; ratios by means and by medians)\n",
			time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), n, strings.Join(controllerQPS, " "), strings.Join(orders, "; "), warmUpRounds, 2*repeats)
		env := ""
		if repeats != 2 {
			env = fmt.Sprintf("HYPERBATCH_BENCH_WORKLOAD_REPEATS=%d ", repeats)
		}
		fmt.Fprintf(&sb, "# make build && bench-run env KUBEBUILDER_ASSETS=$PWD/bin %sgo test ./bench/webhook/ -run '^$' -bench AdmissionWorkloads -benchtime=1x -timeout 60m\n", env)
		fmt.Fprintf(&sb, "# load average at start: %s; warm-up rounds (all pods created): %s\n", loadAtStart, strings.Join(warmUps, "; "))
		for _, kind := range kinds {
			for _, s := range half[kind] {
				r := avg(kind, s)
				fmt.Fprintf(&sb, "%-11s %-16s all %d pods created in %6.2f s (%5.0f pods/s; first pod at %5.2f s)  apiserver CPU %5.0f µs/pod\n", kind, modeName(s), n,
					r.elapsed.Seconds(), float64(n)/r.elapsed.Seconds(), r.first.Seconds(), float64(r.cpuPerPod)/float64(time.Microsecond))
			}
		}
		// A ratio of rates: the time without hyperbatch over the time with it (>= 0.95x: at most
		// about 5% slower).
		ratio := func(kind workloadKind, a, base burstSetup, goal string) {
			if len(rounds[kind][a]) == 0 || len(rounds[kind][base]) == 0 {
				return
			}
			x := avg(kind, base).elapsed.Seconds() / avg(kind, a).elapsed.Seconds()
			xm := med(kind, base).Seconds() / med(kind, a).Seconds()
			cpu := float64(avg(kind, a).cpuPerPod) / float64(avg(kind, base).cpuPerPod)
			name := fmt.Sprintf("%s %s/%s", kind, modeName(a), modeName(base))
			b.ReportMetric(x, strings.ReplaceAll(name, " ", "-")+"-rate")
			b.ReportMetric(xm, strings.ReplaceAll(name, " ", "-")+"-median-rate")
			fmt.Fprintf(&sb, "%-34s pods/s %.2fx by means, %.2fx by medians%s  apiserver CPU per pod %.2fx\n", name, x, xm, goal, cpu)
		}
		ratio(volcanoJobKind, setupPolicy, setupNone, " (goal >= 0.95x)")
		ratio(volcanoJobKind, setupHyperbatch, setupNone, " (goal >= 0.95x)")
		ratio(jobSetKind, setupPolicy, setupNone, " (goal >= 0.95x)")
		ratio(jobSetKind, setupHyperbatch, setupNone, " (goal >= 0.95x)")
		ratio(jobSetKind, setupNoGate, setupNone, "")
		ratio(jobSetKind, setupHyperbatch, setupNoGate, "")
		ratio(jobSetKind, setupNoopGate, setupNone, "")
		ratio(jobSetKind, setupHyperbatch, setupNoopGate, "")
		for _, kind := range kinds {
			for _, s := range half[kind] {
				var parts []string
				for _, r := range rounds[kind][s] {
					parts = append(parts, fmt.Sprintf("%.2f s (first pod %.2f s) %.0f µs/pod", r.elapsed.Seconds(), r.first.Seconds(), float64(r.cpuPerPod)/float64(time.Microsecond)))
				}
				fmt.Fprintf(&sb, "rounds %-11s %-16s %s\n", kind, modeName(s), strings.Join(parts, "; "))
			}
		}
		fmt.Fprintf(&sb, "# load average at end: %s; run through bench-run (the benchmark's cpu cgroup has priority over the other work on the machine)\n", framework.LoadAverage())
		fmt.Print(sb.String())
		if partial || b.Failed() {
			continue
		}
		if err := framework.WriteResultSection("admission.txt", "workloads", sb.String()); err != nil {
			b.Fatal(err)
		}
	}
}

// modeName is setup's name in the workloads section: webhook mode for setupHyperbatch.
func modeName(s burstSetup) string {
	if s == setupHyperbatch {
		return "webhook"
	}
	return string(s)
}

// workloadKind is the workload of a round.
type workloadKind string

const (
	volcanoJobKind workloadKind = "volcano-job"
	jobSetKind     workloadKind = "jobset"
)

// startWorkloadControllers starts, for the rest of the benchmark, Volcano's controller-manager
// (with the Queue bench open) and scheduler against four Ready nodes, the JobSet controller and
// kube-controller-manager's Job controller.
func startWorkloadControllers(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := b.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(w.Config, kc); err != nil {
		b.Fatal(err)
	}
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: benchNS}, Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(true)}}
	if err := w.Client.Create(ctx, q); client.IgnoreAlreadyExists(err) != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(w.Config)
	for i := range 4 {
		framework.CreateReadyNode(b, cs, builders.MakeNode(fmt.Sprintf("bench-node-%d", i)).Obj(), corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"), corev1.ResourcePods: resource.MustParse("1000")})
	}
	start := func(name string, f func(context.Context, framework.NeighbourOptions) (*framework.Process, error), o framework.NeighbourOptions) {
		o.Kubeconfig, o.LogDir = kc, filepath.Join(dir, name)
		if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
			b.Fatal(err)
		}
		p, err := f(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if b.Failed() {
				b.Log(p.LogTail(30))
			}
			_ = p.Stop()
		})
	}
	start("vc-controller-manager", framework.StartVolcanoControllers, framework.NeighbourOptions{ExtraArgs: controllerQPS})
	// A session every 100 ms rather than 500 (framework's): a Job's PodGroup waits for the next
	// session to be enqueued, and that wait is in every Volcano round.
	start("vc-scheduler", framework.StartVolcanoScheduler, framework.NeighbourOptions{SchedulerConf: volcanoEnqueueConfig, ExtraArgs: []string{"--schedule-period=100ms"}})
	start("jobset-controller", framework.StartJobSetController, framework.NeighbourOptions{})
	kcm, err := framework.StartKubeControllerManagerWithFlags(w.Env, controllerQPS, "job-controller")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kcm.Stop)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKeyFromObject(q), q)
		return err == nil && q.Status.State == schedulingv1beta1.QueueStateOpen, nil
	}); err != nil {
		b.Fatalf("Queue %s never Open: %v", benchNS, err)
	}
}

// useWorkloadSetup is useSetup for the workload set-ups: webhook-nogate's (webhook-noopgate's)
// objects go in under webhook's set-up (and webhook's under theirs, to be deleted), so useSetup's
// probe expects its Pods defaulted, as they are.
func useWorkloadSetup(b *testing.B, c client.Client, setups map[burstSetup][]client.Object, setup burstSetup, tag string) {
	if setup == setupNoGate || setup == setupNoopGate {
		swapped := maps.Clone(setups)
		swapped[setupHyperbatch], swapped[setup] = setups[setup], setups[setupHyperbatch]
		setups, setup = swapped, setupHyperbatch
	}
	useSetup(b, c, setups, setup, tag)
}

// policyModeConfigurations are the webhook configurations a policy-mode manager registers: those
// of every kind but the ones the policies cover (cmd/manager's webhookKindsFor), on the bench's
// webhook server (caBundle and URLs as mwc's and vwc's).
func policyModeConfigurations(mwc *admissionregistrationv1.MutatingWebhookConfiguration, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) (
	*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	covered := map[hbwebhook.Kind]bool{}
	for _, p := range admissionpolicy.Programs() {
		covered[p.Kind] = true
	}
	var kinds []hbwebhook.Kind
	for _, k := range hbwebhook.AllKinds() {
		if !covered[k] {
			kinds = append(kinds, k)
		}
	}
	pm, pv := hbwebhook.Configurations(hbwebhook.ConfigOptions{URL: w.URL, CABundle: mwc.Webhooks[0].ClientConfig.CABundle, Kinds: kinds})
	pm, pv = renamed(pm, "-policy-mode"), renamed(pv, "-policy-mode")
	if len(pm.Webhooks) >= len(mwc.Webhooks) || len(pv.Webhooks) >= len(vwc.Webhooks) {
		panic("policy mode keeps every webhook entry: the policies cover no kind")
	}
	return pm, pv
}

// noopGateConfiguration is the gate entry of vwc (as installed) on its own, sent to the no-op
// webhook instead.
func noopGateConfiguration(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.ValidatingWebhookConfiguration {
	out := renamed(vwc, "-bench-noop-gate")
	out.Webhooks = slices.DeleteFunc(out.Webhooks, func(e admissionregistrationv1.ValidatingWebhook) bool {
		return e.Name != hbwebhook.JobSetPodGateEntryName
	})
	if len(out.Webhooks) != 1 {
		panic("hyperbatch's validating configuration has no PodGroup gate entry")
	}
	e := &out.Webhooks[0]
	e.Name = "noop-gate.bench.hyperbatch.dev"
	u := w.URL + noopPath
	e.ClientConfig.URL, e.ClientConfig.Service = &u, nil
	return out
}

// renamed is a copy of obj, as installed, under its name with suffix added.
func renamed[T client.Object](obj T, suffix string) T {
	out := obj.DeepCopyObject().(T)
	out.SetName(obj.GetName() + suffix)
	out.SetResourceVersion("")
	out.SetUID("")
	return out
}

// waitForGate waits until a probe pod carrying a gang JobSet's labels reaches the PodGroup gate
// exactly when setup installs it, and the no-op in its place exactly under webhook-noopgate
// (useSetup's probe sees only the Pod webhooks and policies).
func waitForGate(b *testing.B, c client.Client, setup burstSetup, tag string) {
	want := setup == setupHyperbatch || setup == setupPolicy
	ctx := context.Background()
	k := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		k++
		p := pod()
		p.Name = fmt.Sprintf("gate-probe-%s-%d", tag, k)
		// The labels of a gang JobSet's pod (the gate selects the JobSet webhook's gang label).
		p.Labels = map[string]string{jobsetv1alpha2.JobSetNameKey: "gate-probe", hbv1.JobSetGangLabel: "gate-probe"}
		gate0, noop0 := admissionCalls(b, "JobSetPod"), noopCalls.Load()
		_ = c.Create(ctx, p) // a refusal by the gate counts as a call as well
		called := admissionCalls(b, "JobSetPod") > gate0
		noopCalled := noopCalls.Load() > noop0
		_ = c.Delete(ctx, p)
		return called == want && noopCalled == (setup == setupNoopGate), nil
	})
	if err != nil {
		b.Fatalf("the apiserver did not follow the PodGroup gate configuration of set-up %s: %v", setup, err)
	}
}

// admissionCalls is hyperbatch_webhook_admission_requests_total of kind's CREATEs (Pod: the Pod
// webhooks; JobSetPod: the PodGroup gate), served by the manager in this process.
func admissionCalls(b *testing.B, kind string) float64 {
	v, err := framework.ControllerMetric("hyperbatch_webhook_admission_requests_total", map[string]string{"kind": kind, "operation": "CREATE"})
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// workloadResult is one round: the time from the workload's CREATE until its first and its last pod
// was seen, and the apiserver's CPU time over the round.
type workloadResult struct{ first, elapsed, cpu time.Duration }

// workloadRound creates one workload of kind with n pods, measures it (workloadResult), checks the
// webhook calls the pods made, and deletes the workload and its pods.
func workloadRound(b *testing.B, c client.Client, cs kubernetes.Interface, apiserver int, kind workloadKind, setup burstSetup, name string, n int) workloadResult {
	ctx := context.Background()
	var obj client.Object
	var selector string
	switch kind {
	case volcanoJobKind:
		obj, selector = benchVolcanoJob(name, n), batchv1alpha1.JobNameKey+"="+name
	case jobSetKind:
		obj, selector = benchJobSet(name, n), jobsetv1alpha2.JobSetNameKey+"="+name
		// The gang's PodGroup first, as controllers/podgroup would make it.
		pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: int32(n), Queue: "bench"}}
		if err := c.Create(ctx, pg); err != nil {
			b.Fatalf("%s (%s): the JobSet's PodGroup: %v", name, setup, err)
		}
	}
	list, err := cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		b.Fatal(err)
	}
	if len(list.Items) != 0 {
		b.Fatalf("%s: %d pods exist before the round", name, len(list.Items))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// A retry watcher: the apiserver may close a watch that falls behind a burst, and this one
	// resumes from the last resourceVersion it saw.
	wi, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(benchNS).Watch(ctx, o)
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer wi.Stop()
	podCalls0, gateCalls0, noop0 := admissionCalls(b, "Pod"), admissionCalls(b, "JobSetPod"), noopCalls.Load()
	cpu0, err := cpuTime(apiserver)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := c.Create(ctx, obj); err != nil {
		b.Fatalf("%s (%s): %v", name, setup, err)
	}
	seen := map[string]bool{}
	var first time.Duration
	for len(seen) < n {
		select {
		case ev, ok := <-wi.ResultChan():
			if !ok {
				b.Fatalf("%s (%s): the pod watch ended after %d of %d pods", name, setup, len(seen), n)
			}
			if ev.Type == watch.Added {
				if len(seen) == 0 {
					first = time.Since(start)
				}
				seen[ev.Object.(*corev1.Pod).Name] = true
			}
			if ev.Type == watch.Error {
				b.Fatalf("%s (%s): pod watch error: %v", name, setup, ev.Object)
			}
		case <-wctx.Done():
			b.Fatalf("%s (%s): %d of %d pods after %v", name, setup, len(seen), n, time.Since(start))
		}
	}
	elapsed := time.Since(start)
	cpu1, err := cpuTime(apiserver)
	if err != nil {
		b.Fatal(err)
	}
	wantGate := 0.0
	if kind == jobSetKind && (setup == setupHyperbatch || setup == setupPolicy) {
		wantGate = float64(n)
	}
	if calls := admissionCalls(b, "Pod") - podCalls0; calls != 0 {
		b.Errorf("%s (%s): the controller's pods made %.0f Pod webhook calls, want 0", name, setup, calls)
	}
	if calls := admissionCalls(b, "JobSetPod") - gateCalls0; calls != wantGate {
		b.Errorf("%s (%s): the PodGroup gate was called %.0f times, want %.0f", name, setup, calls, wantGate)
	}
	wantNoop := int64(0)
	if setup == setupNoopGate {
		wantNoop = int64(n)
	}
	if calls := noopCalls.Load() - noop0; calls != wantNoop {
		b.Errorf("%s (%s): the no-op webhook was called %d times, want %d", name, setup, calls, wantNoop)
	}
	deleteWorkload(b, c, cs, obj, selector)
	settle(b, apiserver)
	return workloadResult{first: first, elapsed: elapsed, cpu: cpu1 - cpu0}
}

// deleteWorkload deletes obj and its pods (and a Volcano Job's PodGroup) and waits until they are
// gone, so the next round starts from an empty namespace.
func deleteWorkload(b *testing.B, c client.Client, cs kubernetes.Interface, obj client.Object, selector string) {
	ctx := context.Background()
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		b.Fatal(err)
	}
	if _, ok := obj.(*jobsetv1alpha2.JobSet); ok {
		if err := c.Delete(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: benchNS}}); client.IgnoreNotFound(err) != nil {
			b.Fatal(err)
		}
		// Its Jobs at once, not by the garbage collector: a Job left would recreate the pods
		// deleted below.
		if err := c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(benchNS), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: obj.GetName()},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			b.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); client.IgnoreNotFound(err) != nil || err == nil {
			return false, nil //nolint:nilerr // still there, or a transient error: poll again
		}
		if err := cs.CoreV1().Pods(benchNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
			metav1.ListOptions{LabelSelector: selector}); err != nil {
			return false, nil //nolint:nilerr // poll again
		}
		l, err := cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("%s was not deleted with its pods: %v", obj.GetName(), err)
	}
	// A Volcano Job's PodGroup and a JobSet's Jobs are the garbage collector's (their owner is gone).
}

// settle waits until kube-apiserver is quiet (under 10% of a core over two 500 ms windows in a
// row), so the controllers' work on a deleted workload (the garbage collector, the job
// controllers' and vc-scheduler's reactions to 2,000 deletions) is not counted in the next round.
// It gives up after a minute: the round then starts anyway, and says so.
func settle(b *testing.B, apiserver int) {
	quiet := 0
	prev, err := cpuTime(apiserver)
	if err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, false, func(context.Context) (bool, error) {
		cur, err := cpuTime(apiserver)
		if err != nil {
			return false, err
		}
		if cur-prev < 50*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
		return quiet >= 2, nil
	})
	if err != nil {
		fmt.Printf("kube-apiserver not quiet after a minute (%v); the next round starts anyway\n", err)
	}
}

// benchVolcanoJob is a Volcano Job of one task of n pause pods, a gang of all of them, in the
// Queue bench: complete without Volcano's defaulting webhook. Its pods are hyperbatch-scheduler's
// (the bench policy's default, named here so every set-up has the same Job), which does not run
// here: vc-scheduler enqueues the Job's PodGroup (it takes every PodGroup) but leaves the pods
// alone. Were they its own, every session would rewrite the PodScheduled condition of each pending
// pod (its message counts the gang's pending pods, which change while they are created): some
// thousand pod status writes racing the creations, which made the rounds' times vary by half.
func benchVolcanoJob(name string, n int) *batchv1alpha1.Job {
	j := vcjob()
	j.Name = name
	j.Spec.Queue = benchNS
	j.Spec.SchedulerName = "hyperbatch-scheduler"
	j.Spec.MinAvailable = int32(n)
	j.Spec.Tasks[0].Replicas = int32(n)
	j.Spec.Tasks[0].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	return j
}

// benchJobSet is a JobSet of 4 Jobs of n/4 pause pods each (parallelism = completions), a gang
// of hyperbatch's (its PodGroup is made by workloadRound).
func benchJobSet(name string, n int) *jobsetv1alpha2.JobSet {
	per := int32(n / 4)
	spec := pod().Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 4, Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Parallelism: &per, Completions: &per, Template: corev1.PodTemplateSpec{Spec: spec}}}}}},
	}
}

// medianOf is the median of xs (the mean of the middle two for an even count; 0 for none). It
// sorts a copy.
func medianOf[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
