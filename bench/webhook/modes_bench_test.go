package webhook_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// BenchmarkAdmissionModes creates burstPods bare Pods in the governed bench namespace through
// kube-apiserver under four admission set-ups, in the order policy, hyperbatch, floor, none, none,
// floor, hyperbatch, policy (each set-up twice, mirrored):
//   - policy: hyperbatch's admission policies (--admission=policy), the webhooks' Pod entries gone;
//   - hyperbatch: hyperbatch's webhooks (--admission=webhook);
//   - floor: one no-op mutating webhook;
//   - none: no admission at all.
//
// It reports each set-up's pods/s, the p99 of one creation's latency, and the apiserver's CPU time
// per Pod (utime+stime of the kube-apiserver process over the round, from /proc), and writes them
// to bench/results/admission.txt.
func BenchmarkAdmissionModes(b *testing.B) {
	c, mwc, vwc := burstClient(b)
	apiserver, err := childProcess("kube-apiserver")
	if err != nil {
		b.Fatal(err)
	}
	setups := map[burstSetup][]client.Object{
		setupHyperbatch: {mwc, vwc},
		setupFloor:      {floorConfiguration(mwc.Webhooks[0].ClientConfig)},
		setupPolicy:     admissionpolicy.Objects(admissionpolicy.Options{Excluded: []string{hbwebhook.DefaultNamespace}}),
	}
	order := []burstSetup{setupPolicy, setupHyperbatch, setupFloor, setupNone, setupNone, setupFloor, setupHyperbatch, setupPolicy}
	type round struct {
		burstResult
		cpuPerPod time.Duration
	}
	for iter := 0; iter < b.N; iter++ {
		loadAtStart := framework.LoadAverage()
		rounds := map[burstSetup][]round{}
		for i, setup := range order {
			useSetup(b, c, setups, setup, fmt.Sprintf("modes-%d-%d", iter, i))
			cpu0, err := cpuTime(apiserver)
			if err != nil {
				b.Fatal(err)
			}
			r := burst(b, c, fmt.Sprintf("modes-%d-%d", iter, i), setup)
			cpu1, err := cpuTime(apiserver)
			if err != nil {
				b.Fatal(err)
			}
			rounds[setup] = append(rounds[setup], round{burstResult: r, cpuPerPod: (cpu1 - cpu0) / burstPods})
		}
		useSetup(b, c, setups, setupHyperbatch, fmt.Sprintf("modes-%d-end", iter))
		avg := func(s burstSetup) round {
			var out round
			for _, r := range rounds[s] {
				out.rps += r.rps / float64(len(rounds[s]))
				out.p99 += r.p99 / time.Duration(len(rounds[s]))
				out.cpuPerPod += r.cpuPerPod / time.Duration(len(rounds[s]))
			}
			return out
		}
		pol, hb, fl, none := avg(setupPolicy), avg(setupHyperbatch), avg(setupFloor), avg(setupNone)
		b.ReportMetric(pol.rps/none.rps, "policy/none")
		b.ReportMetric(hb.rps/fl.rps, "webhook/floor")
		b.ReportMetric(float64(hb.p99)/float64(fl.p99), "webhook-p99/floor-p99")
		var sb strings.Builder
		fmt.Fprintf(&sb, "# %s BenchmarkAdmissionModes, GOMAXPROCS=%d, %s, %d bare Pods per round in a governed namespace from %d workers, rounds in the order %s (each set-up's figures are the mean of its two rounds)\n",
			time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), burstPods, concurrency, joinSetups(order))
		fmt.Fprintf(&sb, "# make build && flock /tmp/hyperbatch-bench.lock env KUBEBUILDER_ASSETS=$PWD/bin go test ./bench/webhook/ -run '^$' -bench AdmissionModes -benchtime=1x -timeout 30m\n")
		fmt.Fprintf(&sb, "# load average at start: %s\n", loadAtStart)
		for _, s := range []struct {
			name string
			r    round
		}{{"none", none}, {"floor", fl}, {"webhook", hb}, {"policy", pol}} {
			fmt.Fprintf(&sb, "%-8s %6.0f pods/s  create p99 %7.2f ms  apiserver CPU %6.0f µs/pod\n", s.name, s.r.rps, ms(s.r.p99), float64(s.r.cpuPerPod)/float64(time.Microsecond))
		}
		fmt.Fprintf(&sb, "policy/none pods/s %.2fx (goal >= 0.95x); webhook/floor pods/s %.2fx (goal >= 0.95x); webhook/floor create p99 %.2fx (goal <= 1.20x); floor/none %.2fx\n",
			pol.rps/none.rps, hb.rps/fl.rps, float64(hb.p99)/float64(fl.p99), fl.rps/none.rps)
		for _, s := range order[:4] {
			var parts []string
			for _, r := range rounds[s] {
				parts = append(parts, fmt.Sprintf("%.0f pods/s p99 %.1f ms", r.rps, ms(r.p99)))
			}
			fmt.Fprintf(&sb, "rounds %-8s %s\n", s, strings.Join(parts, "; "))
		}
		fmt.Fprintf(&sb, "# load average at end: %s; the machine is shared with other engineers' work\n", framework.LoadAverage())
		fmt.Print(sb.String())
		if err := framework.WriteResultSection("admission.txt", "modes", sb.String()); err != nil {
			b.Fatal(err)
		}
	}
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
