package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// BenchmarkAdmissionModes creates burstPods bare Pods in the governed bench namespace through
// kube-apiserver under these admission set-ups, each twice in a mirrored order (ABBA; the whole
// order HYPERBATCH_BENCH_MODES_REPEATS times, once by default): policy,
// policy-mutate-checks, policy-mutate, policy-floor, webhook, floor-patch, floor, map-patch, map-noop,
// map-noop-ac, vap-noop, none, then the same backwards:
//   - policy: hyperbatch's admission policies (--admission=policy), the webhooks' Pod entries gone;
//   - policy-mutate, policy-mutate-checks: policy's breakdown, its CREATE MutatingAdmissionPolicy
//     alone and with the checks policy (policy mode with --admission-warnings=false);
//   - webhook: hyperbatch's webhooks (--admission=webhook);
//   - floor-patch: one mutating webhook answering with a one-operation patch (an annotation): the
//     least a webhook that changes the Pod costs (the apiserver applies the patch, decodes the
//     result and runs its mutating admission once more);
//   - floor: one no-op mutating webhook;
//   - map-noop: one MutatingAdmissionPolicy (and binding) matching the same Pods whose mutation, a
//     JSON patch as hyperbatch's, changes nothing: the least such a MAP costs;
//   - map-noop-ac: the same with an apply configuration (an empty annotations map);
//   - map-patch: one MutatingAdmissionPolicy whose JSON patch is floor-patch's one operation (an
//     annotation) for every Pod, with no params and no variables: the least a policy that changes
//     the Pod costs;
//   - policy-floor: policy's policies, bindings and params with expressions that do nothing of
//     hyperbatch's (map-patch's one operation, validations that hold, empty messages): what the
//     apiserver's machinery for them costs;
//   - vap-noop: one ValidatingAdmissionPolicy (and Deny binding) matching the same Pods whose
//     validation always holds for them;
//   - none: no admission at all.
//
// After each round its Pods are deleted and the apiserver is let settle (settle): Pods kept from
// every earlier round made the later rounds slower (the apiserver's heap and its garbage collection
// grow with them), and the mirrored order cancelled that drift in the means only.
//
// It reports each set-up's pods/s, the p99 of one creation's latency, and the apiserver's CPU time
// per Pod (utime+stime of the kube-apiserver process over the round, from /proc), and writes them
// to bench/results/admission.txt. HYPERBATCH_BENCH_SETUPS (e.g. "policy,map-noop") runs only those
// set-ups (ABBA still) and writes no results; HYPERBATCH_BENCH_PPROF=DIR saves a 10 s CPU profile of
// kube-apiserver (its /debug/pprof) taken during each round as DIR/<round>-<setup>.pprof.
func BenchmarkAdmissionModes(b *testing.B) {
	c, mwc, vwc := burstClient(b)
	apiserver, err := childProcess("kube-apiserver")
	if err != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(w.Config)
	setups := map[burstSetup][]client.Object{
		setupHyperbatch: {mwc, vwc},
		setupFloor:      {floorConfiguration(mwc.Webhooks[0].ClientConfig)},
		setupFloorPatch: {floorPatchConfiguration(mwc.Webhooks[0].ClientConfig)},
		setupPolicy:     policyObjects(),
		// The breakdown: the CREATE defaults alone, then with the checks (policy adds the warnings).
		setupPolicyMutate:       policyObjects(admissionpolicy.CreatePolicyName(defaults.KindPod)),
		setupPolicyMutateChecks: policyObjects(admissionpolicy.CreatePolicyName(defaults.KindPod), admissionpolicy.CheckPolicyName(defaults.KindPod)),
		setupMAPNoop:            noopMutatingPolicy(admissionregistrationv1.PatchTypeJSONPatch),
		setupMAPNoopAC:          noopMutatingPolicy(admissionregistrationv1.PatchTypeApplyConfiguration),
		setupMAPPatch:           patchMutatingPolicy(),
		setupPolicyFloor:        policyFloorObjects(),
		setupVAPNoop:            noopValidatingPolicy(),
	}
	all := []burstSetup{setupPolicy, setupPolicyMutateChecks, setupPolicyMutate, setupPolicyFloor, setupHyperbatch, setupFloorPatch, setupFloor, setupMAPPatch, setupMAPNoop, setupMAPNoopAC, setupVAPNoop, setupNone}
	half, partial := all, false
	if only := os.Getenv("HYPERBATCH_BENCH_SETUPS"); only != "" {
		half, partial = nil, true
		for _, s := range strings.Split(only, ",") {
			half = append(half, burstSetup(s))
		}
	}
	abba := append(slices.Clone(half), half...)
	slices.Reverse(abba[len(half):])
	// HYPERBATCH_BENCH_MODES_REPEATS runs the mirrored order that many times (once by default).
	repeats := 1
	if v, err := strconv.Atoi(os.Getenv("HYPERBATCH_BENCH_MODES_REPEATS")); err == nil && v > 0 {
		repeats = v
	}
	var order []burstSetup
	for range repeats {
		order = append(order, abba...)
	}
	profiles := os.Getenv("HYPERBATCH_BENCH_PPROF")
	for iter := 0; iter < b.N; iter++ {
		loadAtStart := framework.LoadAverage()
		rounds := map[burstSetup][]modesRound{}
		for i, setup := range order {
			useSetup(b, c, setups, setup, fmt.Sprintf("modes-%d-%d", iter, i))
			var profiled chan error
			if profiles != "" {
				profiled = make(chan error, 1)
				go func() { profiled <- saveProfile(filepath.Join(profiles, fmt.Sprintf("%d-%s.pprof", i, setup))) }()
			}
			cpu0, err := cpuTime(apiserver)
			if err != nil {
				b.Fatal(err)
			}
			r := burst(b, c, fmt.Sprintf("modes-%d-%d", iter, i), setup)
			cpu1, err := cpuTime(apiserver)
			if err != nil {
				b.Fatal(err)
			}
			if profiled != nil {
				if err := <-profiled; err != nil {
					b.Fatal(err)
				}
			}
			rounds[setup] = append(rounds[setup], modesRound{burstResult: r, cpuPerPod: (cpu1 - cpu0) / burstPods})
			deleteBurstPods(b, cs)
			settle(b, apiserver)
		}
		useSetup(b, c, setups, setupHyperbatch, fmt.Sprintf("modes-%d-end", iter))
		avg := func(s burstSetup) modesRound {
			var out modesRound
			for _, r := range rounds[s] {
				out.rps += r.rps / float64(len(rounds[s]))
				out.p99 += r.p99 / time.Duration(len(rounds[s]))
				out.cpuPerPod += r.cpuPerPod / time.Duration(len(rounds[s]))
			}
			return out
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "# %s BenchmarkAdmissionModes, GOMAXPROCS=%d, %s, %d bare Pods per round in a governed namespace from %d workers, rounds in the order %s, each round's Pods deleted before the next (each set-up's figures are the mean of its %d rounds; pods/s ratios by means, and by medians in brackets)\n",
			time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), burstPods, concurrency, joinSetups(order), 2*repeats)
		env := ""
		if repeats != 1 {
			env = fmt.Sprintf("HYPERBATCH_BENCH_MODES_REPEATS=%d ", repeats)
		}
		fmt.Fprintf(&sb, "# make build && bench-run env KUBEBUILDER_ASSETS=$PWD/bin %sgo test ./bench/webhook/ -run '^$' -bench AdmissionModes -benchtime=1x -timeout 60m\n", env)
		fmt.Fprintf(&sb, "# load average at start: %s\n", loadAtStart)
		for _, s := range []burstSetup{setupNone, setupMAPNoop, setupMAPNoopAC, setupMAPPatch, setupVAPNoop, setupFloor, setupFloorPatch, setupHyperbatch, setupPolicyFloor, setupPolicyMutate, setupPolicyMutateChecks, setupPolicy} {
			if _, ok := rounds[s]; !ok {
				continue
			}
			r := avg(s)
			fmt.Fprintf(&sb, "%-20s %6.0f pods/s  create p99 %7.2f ms  apiserver CPU %6.0f µs/pod\n", s, r.rps, ms(r.p99), float64(r.cpuPerPod)/float64(time.Microsecond))
		}
		ratio := func(name, goal string, a, base burstSetup, p99 bool) {
			ra, okA := rounds[a]
			rb, okB := rounds[base]
			if !okA || !okB || len(ra) == 0 || len(rb) == 0 {
				return
			}
			x := avg(a).rps / avg(base).rps
			if p99 {
				x = float64(avg(a).p99) / float64(avg(base).p99)
				b.ReportMetric(x, strings.ReplaceAll(name, " ", "-"))
				fmt.Fprintf(&sb, "%-42s %.2fx%s\n", name, x, goal)
				return
			}
			xm := medianRate(ra) / medianRate(rb)
			b.ReportMetric(x, strings.ReplaceAll(name, " ", "-"))
			fmt.Fprintf(&sb, "%-42s %.2fx [%.2fx]%s\n", name, x, xm, goal)
		}
		ratio("policy/none pods/s", " (goal >= 0.95x)", setupPolicy, setupNone, false)
		ratio("policy/map-noop pods/s", "", setupPolicy, setupMAPNoop, false)
		ratio("policy/map-patch pods/s", "", setupPolicy, setupMAPPatch, false)
		ratio("policy/policy-floor pods/s", "", setupPolicy, setupPolicyFloor, false)
		ratio("policy-floor/map-patch pods/s", "", setupPolicyFloor, setupMAPPatch, false)
		ratio("policy-mutate/map-noop pods/s", "", setupPolicyMutate, setupMAPNoop, false)
		ratio("policy-mutate/map-patch pods/s", "", setupPolicyMutate, setupMAPPatch, false)
		ratio("policy-mutate-checks/map-patch pods/s", "", setupPolicyMutateChecks, setupMAPPatch, false)
		ratio("policy-mutate-checks/policy-mutate pods/s", "", setupPolicyMutateChecks, setupPolicyMutate, false)
		ratio("policy/policy-mutate-checks pods/s", "", setupPolicy, setupPolicyMutateChecks, false)
		ratio("webhook/floor pods/s", " (goal >= 0.95x)", setupHyperbatch, setupFloor, false)
		ratio("webhook/floor create p99", " (goal <= 1.20x)", setupHyperbatch, setupFloor, true)
		ratio("webhook/floor-patch pods/s", "", setupHyperbatch, setupFloorPatch, false)
		ratio("webhook/floor-patch create p99", "", setupHyperbatch, setupFloorPatch, true)
		ratio("floor-patch/floor pods/s", "", setupFloorPatch, setupFloor, false)
		ratio("policy/webhook pods/s", "", setupPolicy, setupHyperbatch, false)
		ratio("map-noop/none pods/s", "", setupMAPNoop, setupNone, false)
		ratio("map-noop-ac/none pods/s", "", setupMAPNoopAC, setupNone, false)
		ratio("map-patch/map-noop pods/s", "", setupMAPPatch, setupMAPNoop, false)
		ratio("map-patch/floor-patch pods/s", "", setupMAPPatch, setupFloorPatch, false)
		ratio("vap-noop/none pods/s", "", setupVAPNoop, setupNone, false)
		ratio("floor/none pods/s", "", setupFloor, setupNone, false)
		for _, s := range half {
			var parts []string
			for _, r := range rounds[s] {
				parts = append(parts, fmt.Sprintf("%.0f pods/s p99 %.1f ms %.0f µs/pod", r.rps, ms(r.p99), float64(r.cpuPerPod)/float64(time.Microsecond)))
			}
			fmt.Fprintf(&sb, "rounds %-20s %s\n", s, strings.Join(parts, "; "))
		}
		fmt.Fprintf(&sb, "# load average at end: %s; run through bench-run (the benchmark's cpu cgroup has priority over the other work on the machine)\n", framework.LoadAverage())
		fmt.Print(sb.String())
		if partial {
			continue
		}
		if err := framework.WriteResultSection("admission.txt", "modes", sb.String()); err != nil {
			b.Fatal(err)
		}
	}
}

// saveProfile writes a 10 s CPU profile of the apiserver (its /debug/pprof/profile, served with
// --profiling, the default) to path.
func saveProfile(path string) error {
	hc, err := rest.HTTPClientFor(w.Config)
	if err != nil {
		return err
	}
	hc.Timeout = time.Minute
	resp, err := hc.Get(strings.TrimSuffix(w.Config.Host, "/") + "/debug/pprof/profile?seconds=10")
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling kube-apiserver: HTTP %d", resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// noopProbeLabel marks useSetup's probe Pods; the no-op policies act on those alone, so a probe
// shows the apiserver has loaded them while every burst Pod passes unchanged.
const noopProbeLabel = "bench.hyperbatch.dev/probe"

// noopMatch is what the no-op policies' bindings match: the bench namespace's Pod CREATEs (as the
// floor webhook's entry).
func noopMatch() (*admissionregistrationv1.MatchResources, *admissionregistrationv1.MatchResources) {
	scope := admissionregistrationv1.NamespacedScope
	constraints := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &scope}}}}}
	binding := &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: benchNS}}}
	return constraints, binding
}

// noopMutatingPolicy is a MutatingAdmissionPolicy that annotates probe Pods only: every other Pod
// passes unchanged, but the apiserver still evaluates the mutation and applies its result. The
// map-noop set-up's is a JSON patch (an empty list for a burst Pod: the apiserver still encodes the
// Pod to JSON, applies the patch and decodes the result), map-noop-ac's an apply configuration (an
// empty annotations map: still merged over the whole Pod with structured-merge-diff).
func noopMutatingPolicy(patchType admissionregistrationv1.PatchType) []client.Object {
	probe := "'" + noopProbeLabel + "' in object.metadata.?labels.orValue({})"
	m := admissionregistrationv1.Mutation{PatchType: patchType}
	name := "bench-noop-map"
	if patchType == admissionregistrationv1.PatchTypeJSONPatch {
		m.JSONPatch = &admissionregistrationv1.JSONPatch{Expression: probe + " ? [JSONPatch{op: 'add', path: '/metadata/annotations', value: {'" +
			noopProbeLabel + "': 'map'}}] : []"}
	} else {
		name += "-ac"
		m.ApplyConfiguration = &admissionregistrationv1.ApplyConfiguration{Expression: "Object{metadata: Object.metadata{annotations: {?'" + noopProbeLabel + "': " +
			probe + " ? optional.of('map') : optional.none()}}}"}
	}
	return benchMutatingPolicy(name, m)
}

// patchMutatingPolicy is the map-patch set-up: a MutatingAdmissionPolicy whose JSON patch adds
// floor-patch's annotation to every Pod (the bench's Pods have no annotations: the patch adds the
// map), with no params and no variables.
func patchMutatingPolicy() []client.Object {
	return benchMutatingPolicy("bench-patch-map", admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: floorPatchExpression}})
}

// floorPatchExpression is a JSON patch of one operation, floor-patch's: it adds the annotations
// map with floorPatchAnnotation (the bench's Pods have no annotations).
const floorPatchExpression = "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'" + floorPatchAnnotation + "': '1'}}]"

// benchMutatingPolicy is a MutatingAdmissionPolicy of mutation m and its binding, both named name,
// matching the bench namespace's Pod CREATEs (noopMatch), failing closed, never reinvoked.
func benchMutatingPolicy(name string, m admissionregistrationv1.Mutation) []client.Object {
	constraints, binding := noopMatch()
	fp := admissionregistrationv1.Fail
	return []client.Object{
		&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: constraints, FailurePolicy: &fp,
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy, Mutations: []admissionregistrationv1.Mutation{m}}},
		&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name, MatchResources: binding}},
	}
}

// policyFloorObjects is the policy-floor set-up: policy mode's objects (policyObjects) renamed
// "floor-…", with the same params, variables and bindings, whose expressions do nothing of
// hyperbatch's: the CREATE mutation adds floor-patch's annotation (as map-patch), the UPDATE
// mutation (not run by a burst) is left as it is, every validation holds and every message is empty.
func policyFloorObjects() []client.Object {
	var out []client.Object
	for _, o := range policyObjects() {
		o = o.DeepCopyObject().(client.Object)
		o.SetName("floor-" + o.GetName())
		switch p := o.(type) {
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			for i := range p.Spec.Mutations {
				if m := &p.Spec.Mutations[i]; m.JSONPatch != nil {
					m.JSONPatch.Expression = floorPatchExpression
				}
			}
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			p.Spec.PolicyName = "floor-" + p.Spec.PolicyName
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			for i := range p.Spec.Validations {
				p.Spec.Validations[i].Expression = "true"
				if p.Spec.Validations[i].MessageExpression != "" {
					p.Spec.Validations[i].MessageExpression = "''"
				}
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			p.Spec.PolicyName = "floor-" + p.Spec.PolicyName
		}
		out = append(out, o)
	}
	return out
}

// noopValidatingPolicy is the vap-noop set-up: a ValidatingAdmissionPolicy (Deny) that holds for
// every Pod but probe Pods with the label's value "deny".
func noopValidatingPolicy() []client.Object {
	constraints, binding := noopMatch()
	fp := admissionregistrationv1.Fail
	name := "bench-noop-vap"
	return []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: constraints, FailurePolicy: &fp,
				Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.?labels.orValue({})[?'" + noopProbeLabel + "'].orValue('') != 'deny'",
					Message: "bench probe"}}}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, MatchResources: binding,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}},
	}
}

// policyObjects are hyperbatch's admission policies of policy mode and their bindings; with names,
// only those policies (and their bindings).
func policyObjects(names ...string) []client.Object {
	var out []client.Object
	for _, o := range admissionpolicy.Objects(admissionpolicy.Options{Excluded: []string{hbwebhook.DefaultNamespace}}) {
		if len(names) == 0 || slices.Contains(names, o.GetName()) {
			out = append(out, o)
		}
	}
	return out
}

func joinSetups(order []burstSetup) string {
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// childProcess is the pid of this process's child named comm (envtest starts kube-apiserver so).
func childProcess(comm string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	me := os.Getpid()
	for _, d := range dirs {
		f := statFields(filepath.Join(d, "stat"))
		if len(f) > 2 && f[0] == comm {
			if ppid, _ := strconv.Atoi(f[2]); ppid == me {
				return strconv.Atoi(filepath.Base(d))
			}
		}
	}
	return 0, fmt.Errorf("no child process %s of pid %d", comm, me)
}

// statFields are /proc/<pid>/stat's fields from comm on (comm without its parentheses).
func statFields(path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return nil
	}
	return append([]string{string(raw[open+1 : end])}, strings.Fields(string(raw[end+1:]))...)
}

// cpuTime is the process's user+system CPU time (clock ticks of 10 ms: USER_HZ is 100 on Linux).
func cpuTime(pid int) (time.Duration, error) {
	f := statFields(fmt.Sprintf("/proc/%d/stat", pid))
	if len(f) < 14 {
		return 0, fmt.Errorf("reading /proc/%d/stat", pid)
	}
	// f[0] is stat field 2 (comm), so field n is f[n-2]: utime is field 14, stime 15.
	u, err1 := strconv.ParseInt(f[12], 10, 64)
	s, err2 := strconv.ParseInt(f[13], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// deleteBurstPods deletes every Pod of the bench namespace (a round's burst; the probes are
// deleted by useSetup) and waits until none is left. The Pods are bound to no node, so they go at
// once.
func deleteBurstPods(b *testing.B, cs kubernetes.Interface) {
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cs.CoreV1().Pods(benchNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return false, nil //nolint:nilerr // poll again
		}
		l, err := cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("the bench namespace's Pods were not deleted: %v", err)
	}
}

// modesRound is one round of BenchmarkAdmissionModes.
type modesRound struct {
	burstResult
	cpuPerPod time.Duration
}

// medianRate is the median pods/s of rounds.
func medianRate(rounds []modesRound) float64 {
	r := make([]float64, len(rounds))
	for i, x := range rounds {
		r[i] = x.rps
	}
	return medianOf(r)
}
