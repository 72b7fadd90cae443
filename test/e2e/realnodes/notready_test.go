//go:build e2e && realnodes

package realnodes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// The failure path "a node going NotReady during a gang leaves no partly bound gang" on real nodes.
// A 4-pod gang JobSet (2 Jobs × 2 pods, hyperbatch-scheduler, network topology hard) whose pods are
// sized so that each real node holds 2 of them: the gang needs both nodes.
//
//	(a) real-node-1's kubelet is stopped (`localcluster stop-kubelet`; its containerd keeps running)
//	    until the node controller marks the node Ready=Unknown and taints it
//	    node.kubernetes.io/unreachable:NoSchedule. The gang is created then: its pods' PodScheduled
//	    condition names that taint on real-node-1, and no pod of the gang is bound. The kubelet is
//	    started again: the gang is bound whole (4 pods, 2 per node) and runs to completion. The time
//	    from the restart to the whole gang Running is measured, rounds times.
//	(b) a second gang is created with both nodes Ready; as soon as the scheduler binds its first pod
//	    to real-node-1, that kubelet is stopped. All 4 pods are bound (the scheduler binds the gang
//	    whole: the node's NotReady comes 50 s later), the node goes unreachable, the pods on
//	    real-node-0 run to completion, and once the kubelet is back the pods on real-node-1 run too
//	    (their containerd kept what had started). No pod is replaced: the taint eviction controller
//	    deletes pods only after their 300 s toleration.
//
// It starts its own cluster (cold `up` with two real nodes, then `down`), unless
// HYPERBATCH_REALNODES_DIR names the directory of a running one (`localcluster up --real-nodes 2
// --dir DIR`, relative to the repository), whose real-node-1 it stops and starts. HYPERBATCH_BENCH_ROUNDS sets the rounds of (a)
// (default 1); HYPERBATCH_BENCH_OUT names a file to write the measurements to.
//
//	nice -n 19 go test -tags e2e,realnodes -run TestGangWithNotReadyNode -count=1 -timeout 30m -v ./test/e2e/realnodes/
func TestGangWithNotReadyNode(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	rounds := 1
	if v := os.Getenv("HYPERBATCH_BENCH_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("HYPERBATCH_BENCH_ROUNDS=%q: want a positive number", v)
		}
	}
	lc := filepath.Join(t.TempDir(), "localcluster")
	build := exec.Command("go", "build", "-o", lc, "./hack/localcluster")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localcluster: %v\n%s", err, out)
	}
	dir := os.Getenv("HYPERBATCH_REALNODES_DIR")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(lc, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if dir == "" {
		dir = filepath.Join(root, "_output", "e2e-notready")
		out, err := run("up", "--real-nodes", "2", "--nodes", "4", "--no-trainer", "--dir", dir, "--port-base", strconv.Itoa(portBase+200), "--bin", filepath.Join(root, "bin"))
		t.Cleanup(func() {
			if out, err := run("down", "--dir", dir); err != nil {
				t.Errorf("down: %v\n%s", err, out)
			}
		})
		if err != nil {
			t.Fatalf("up: %v\n%s", err, out)
		}
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir) // relative to the repository, as localcluster's --dir
	}
	nr := &notReadyRun{t: t, root: root, dir: dir, run: run, kubeconfig: filepath.Join(dir, "kubeconfig")}
	nr.cs = clientset(t, nr.kubeconfig)
	// Whatever happens, leave the kubelet running.
	t.Cleanup(func() {
		if out, err := run("start-kubelet", "--node", "1", "--dir", dir); err != nil && !strings.Contains(out, "already runs") {
			t.Errorf("start-kubelet in cleanup: %v\n%s", err, out)
		}
	})
	nr.waitNode(true, 2*time.Minute)
	nr.cpu = nr.podCPU()
	t.Logf("pod request %s cpu: 2 per real node, not 3", nr.cpu.String())

	load := loadavg()
	var restartRunning, restartReady, restartBound, notReadyAfter []time.Duration
	for r := 0; r < rounds; r++ {
		m := nr.notReadyBeforeGang(fmt.Sprintf("nr-a-%d", r))
		notReadyAfter = append(notReadyAfter, m.notReady)
		restartReady = append(restartReady, m.ready)
		restartBound = append(restartBound, m.bound)
		restartRunning = append(restartRunning, m.running)
	}
	b := nr.notReadyAfterBinding("nr-b")

	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s TestGangWithNotReadyNode, GOMAXPROCS=%d, %s, load average at start %s\n", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), load)
	fmt.Fprintf(&sb, "# nice -n 19 go test -tags e2e,realnodes -run TestGangWithNotReadyNode -count=1 -timeout 30m ./test/e2e/realnodes/ (HYPERBATCH_BENCH_ROUNDS=%d)\n", rounds)
	fmt.Fprintf(&sb, "# (a) real-node-1's kubelet stopped, the node Unknown and tainted unreachable, then a 4-pod gang JobSet (2 pods of %s cpu per node, hard topology) created: no pod bound, the pods' condition names the taint; then the kubelet started again\n", nr.cpu.String())
	fmt.Fprintf(&sb, "kubelet stop -> node Unknown + unreachable taint   median %6.1f s  (all: %s ms)\n", ms(median(notReadyAfter))/1000, list(notReadyAfter))
	fmt.Fprintf(&sb, "kubelet start -> node Ready, taints gone          median %6.1f s  (all: %s ms)\n", ms(median(restartReady))/1000, list(restartReady))
	fmt.Fprintf(&sb, "kubelet start -> all 4 pods bound                 median %6.1f s  (all: %s ms)\n", ms(median(restartBound))/1000, list(restartBound))
	fmt.Fprintf(&sb, "kubelet start -> all 4 pods Running               median %6.1f s  min %6.1f  max %6.1f  (all: %s ms)\n",
		ms(median(restartRunning))/1000, ms(minOf(restartRunning))/1000, ms(maxOf(restartRunning))/1000, list(restartRunning))
	fmt.Fprintf(&sb, "# (b) a gang created with both nodes Ready; real-node-1's kubelet stopped once the first pod was bound there\n")
	fmt.Fprintf(&sb, "bound before the stop: %d of 4; bound in all: 4 of 4, %d on real-node-1; Running on real-node-0 while real-node-1 was unreachable: %d; real-node-1's containers started before the stop %d, after the restart %d; kubelet start -> all 4 Succeeded %.1f s; pods replaced: 0\n",
		b.boundAtStop, b.onNode1, b.runningWhileDown, b.startedBefore, b.startedAfter, ms(b.succeeded)/1000)
	t.Log("\n" + sb.String())
	if f := os.Getenv("HYPERBATCH_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type notReadyRun struct {
	t          *testing.T
	root, dir  string
	kubeconfig string
	run        func(...string) (string, error)
	cs         *kubernetes.Clientset
	cpu        resource.Quantity
}

type roundA struct{ notReady, ready, bound, running time.Duration }

const unreachableTaint = "node.kubernetes.io/unreachable:NoSchedule"

// notReadyBeforeGang is part (a), one round.
func (nr *notReadyRun) notReadyBeforeGang(name string) roundA {
	t := nr.t
	var m roundA
	stopped := nr.stopKubelet()
	nr.waitNode(false, 3*time.Minute)
	m.notReady = time.Since(stopped)
	t.Logf("%s: real-node-1 Unknown and tainted %s %s after its kubelet stopped", name, unreachableTaint, m.notReady.Round(time.Millisecond))

	g := nr.watchGang(name)
	defer g.stop()
	nr.apply(name, "--duration=15s")
	// Positive signal: the scheduler tried the gang and said why it waits, naming the taint.
	want := unreachableTaint + " on real-node-1"
	msg := g.waitCondition(want, 2*time.Minute)
	t.Logf("%s: waiting: %s", name, msg)
	nr.waitGangEvent(name, "GangWaiting", want, time.Minute)
	if n := g.boundCount(); n != 0 {
		t.Fatalf("%s: %d pods of the gang bound while real-node-1 was unreachable (a partly bound gang): %v", name, n, g.bindings())
	}
	if n := g.podCount(); n != 4 {
		t.Fatalf("%s: %d pods exist, want all 4 of the gang (the wait must be for the node, not for members)", name, n)
	}

	started := nr.startKubelet()
	nr.waitNode(true, 2*time.Minute)
	m.ready = time.Since(started)
	g.waitRunning(4, 3*time.Minute)
	m.bound, m.running = g.allBoundAt().Sub(started), g.allRunningAt().Sub(started)
	if g.firstBoundAt().Before(started) {
		t.Fatalf("%s: a pod was bound %s before the kubelet restart", name, started.Sub(g.firstBoundAt()))
	}
	perNode := g.perNode()
	if perNode["real-node-0"] != 2 || perNode["real-node-1"] != 2 {
		t.Fatalf("%s: the gang's pods per node %v, want 2 on each real node", name, perNode)
	}
	g.waitSucceeded(4, 3*time.Minute)
	nr.noPartlyBound(name)
	t.Logf("%s: kubelet start -> node Ready %s, all 4 bound %s, all 4 Running %s (spread %s between the first and last binding)",
		name, m.ready.Round(time.Millisecond), m.bound.Round(time.Millisecond), m.running.Round(time.Millisecond), g.allBoundAt().Sub(g.firstBoundAt()).Round(time.Millisecond))
	nr.deleteJobSet(name)
	return m
}

type roundB struct {
	boundAtStop, onNode1, runningWhileDown int
	// The containers of real-node-1's pods that started before the kubelet stopped, and after it
	// started again (none can start in between: nothing runs them).
	startedBefore, startedAfter int
	succeeded                   time.Duration
}

// notReadyAfterBinding is part (b).
func (nr *notReadyRun) notReadyAfterBinding(name string) roundB {
	t := nr.t
	var b roundB
	g := nr.watchGang(name)
	defer g.stop()
	nr.apply(name, "--duration=20s")
	g.waitBoundTo("real-node-1", 2*time.Minute)
	b.boundAtStop = g.boundCount()
	stopped := nr.stopKubelet()
	t.Logf("%s: real-node-1's kubelet stopped with %d of 4 pods bound", name, b.boundAtStop)
	nr.waitNode(false, 3*time.Minute)
	if n := g.boundCount(); n != 4 {
		t.Fatalf("%s: %d of 4 pods bound once real-node-1 was unreachable: a partly bound gang (%v)", name, n, g.bindings())
	}
	b.onNode1 = g.perNode()["real-node-1"]
	// The pods on real-node-0 run (and finish) while real-node-1 is down.
	g.waitRunningOn("real-node-0", 2, 2*time.Minute)
	b.runningWhileDown = 2
	started := nr.startKubelet()
	nr.waitNode(true, 2*time.Minute)
	g.waitSucceeded(4, 3*time.Minute)
	b.succeeded = g.allSucceededAt().Sub(started)
	b.startedAfter, b.startedBefore = nr.containerStarts(name, "real-node-1", stopped, started)
	if n := g.podCount(); n != 4 {
		t.Fatalf("%s: %d pods of the gang were seen, want 4 (a pod was replaced)", name, n)
	}
	nr.noPartlyBound(name)
	t.Logf("%s: kubelet start -> all 4 Succeeded %s", name, b.succeeded.Round(time.Millisecond))
	nr.deleteJobSet(name)
	return b
}

func (nr *notReadyRun) stopKubelet() time.Time {
	at := time.Now()
	if out, err := nr.run("stop-kubelet", "--node", "1", "--dir", nr.dir); err != nil {
		nr.t.Fatalf("stop-kubelet: %v\n%s", err, out)
	}
	return at
}

func (nr *notReadyRun) startKubelet() time.Time {
	at := time.Now()
	if out, err := nr.run("start-kubelet", "--node", "1", "--dir", nr.dir); err != nil {
		nr.t.Fatalf("start-kubelet: %v\n%s", err, out)
	}
	return at
}

// stoppedNode is the real node whose kubelet the test stops and starts (--node 1).
const stoppedNode = "real-node-1"

// waitNode waits until stoppedNode is Ready with neither node controller taint (ready), or is not
// Ready (Unknown or False) and tainted node.kubernetes.io/unreachable or not-ready NoSchedule (!ready).
func (nr *notReadyRun) waitNode(ready bool, timeout time.Duration) {
	nr.t.Helper()
	name := stoppedNode
	deadline := time.Now().Add(timeout)
	for {
		n, err := nr.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			nr.t.Fatal(err)
		}
		status, tainted := corev1.ConditionUnknown, false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				status = c.Status
			}
		}
		for _, tn := range n.Spec.Taints {
			if (tn.Key == corev1.TaintNodeUnreachable || tn.Key == corev1.TaintNodeNotReady) && tn.Effect == corev1.TaintEffectNoSchedule {
				tainted = true
			}
		}
		if ready && status == corev1.ConditionTrue && !tainted || !ready && status != corev1.ConditionTrue && tainted {
			return
		}
		if time.Now().After(deadline) {
			nr.t.Fatalf("node %s: Ready=%s, tainted %v after %s; want ready=%v", name, status, n.Spec.Taints, timeout, ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// podCPU is the CPU request that fits twice but not three times on each real node: half of the
// least free CPU (allocatable less the requests of its unfinished pods), in whole millicores.
func (nr *notReadyRun) podCPU() resource.Quantity {
	t := nr.t
	least := int64(-1)
	for _, name := range []string{"real-node-0", "real-node-1"} {
		n, err := nr.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		free := n.Status.Allocatable.Cpu().MilliValue()
		pods, err := nr.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, c := range p.Spec.Containers {
				free -= c.Resources.Requests.Cpu().MilliValue()
			}
		}
		if least < 0 || free < least {
			least = free
		}
	}
	if least < 200 {
		t.Fatalf("the real nodes have %dm CPU free at least; this test needs 200m", least)
	}
	return *resource.NewMilliQuantity(least/2, resource.DecimalSI)
}

// apply creates the gang JobSet name: 2 Jobs × 2 pods of the worker image with args, nr.cpu each.
func (nr *notReadyRun) apply(name, args string) {
	manifest := fmt.Sprintf(`apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: %s
  namespace: default
  annotations: {scheduling.volcano.sh/queue-name: default, volcano.sh/network-topology-mode: hard}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          spec:
            schedulerName: hyperbatch-scheduler
            restartPolicy: Never
            nodeSelector: {"hyperbatch.dev/e2e-node": "real"}
            containers:
            - name: worker
              image: hyperbatch.local/worker:dev
              args: [%q]
              resources: {requests: {cpu: %s, memory: 32Mi}}
`, name, args, nr.cpu.String())
	path := filepath.Join(nr.t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		nr.t.Fatal(err)
	}
	if out, err := nr.kubectl("apply", "-f", path); err != nil {
		nr.t.Fatalf("kubectl apply %s: %v\n%s", name, err, out)
	}
}

func (nr *notReadyRun) kubectl(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(nr.root, "bin", "kubectl"), append([]string{"--kubeconfig", nr.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

func (nr *notReadyRun) deleteJobSet(name string) {
	if out, err := nr.kubectl("delete", "jobset", "-n", "default", name, "--wait=true", "--cascade=foreground", "--timeout=2m"); err != nil {
		nr.t.Fatalf("kubectl delete jobset %s: %v\n%s", name, err, out)
	}
}

// waitGangEvent waits for an Event with reason on the gang's PodGroup (named as the JobSet) whose
// note contains want.
func (nr *notReadyRun) waitGangEvent(name, reason, want string, timeout time.Duration) {
	nr.t.Helper()
	deadline := time.Now().Add(timeout)
	var seen []string
	for {
		evs, err := nr.cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			nr.t.Fatal(err)
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			if e.Regarding.Kind == "PodGroup" && e.Regarding.Name == name {
				if strings.Contains(e.Note, want) {
					return
				}
				seen = append(seen, e.Note)
			}
		}
		if time.Now().After(deadline) {
			nr.t.Fatalf("%s: no %s Event on the PodGroup naming %q after %s; seen: %q", name, reason, want, timeout, seen)
		}
		time.Sleep(time.Second)
	}
}

// containerStarts counts the containers of the JobSet's pods on node that started (their
// terminated state's startedAt, seconds) at or after started, and before stopped.
func (nr *notReadyRun) containerStarts(name, node string, stopped, started time.Time) (after, before int) {
	pods, err := nr.cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		nr.t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				nr.t.Fatalf("%s: container of %s on %s not terminated: %+v", name, p.Name, node, cs.State)
			}
			if cs.State.Terminated.ExitCode != 0 {
				nr.t.Fatalf("%s: container of %s on %s exited %d", name, p.Name, node, cs.State.Terminated.ExitCode)
			}
			at := cs.State.Terminated.StartedAt.Time
			switch {
			case !at.Before(started.Truncate(time.Second)):
				after++
			case at.Before(stopped.Add(time.Second)):
				before++
			default:
				nr.t.Fatalf("%s: container of %s on %s started at %s, while its kubelet was stopped (%s to %s)", name, p.Name, node, at, stopped, started)
			}
		}
	}
	return after, before
}

// noPartlyBound fails when hyperbatch-scheduler reported the gang partly bound.
func (nr *notReadyRun) noPartlyBound(name string) {
	evs, err := nr.cs.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=GangPartlyBound"})
	if err != nil {
		nr.t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == name {
			nr.t.Fatalf("%s: GangPartlyBound: %s", name, e.Note)
		}
	}
}

// gangWatch follows the gang's pods from before their creation: when each was first bound, Running
// and Succeeded, and the last PodScheduled=False message.
type gangWatch struct {
	t      *testing.T
	name   string
	cancel context.CancelFunc
	mu     sync.Mutex
	pods   map[string]*podSeen
	err    error
	change chan struct{}
}

type podSeen struct {
	node                      string
	bound, running, succeeded time.Time
	unschedulable             string
	failed                    string
}

func (nr *notReadyRun) watchGang(name string) *gangWatch {
	ctx, cancel := context.WithCancel(context.Background())
	g := &gangWatch{t: nr.t, name: name, cancel: cancel, pods: map[string]*podSeen{}, change: make(chan struct{}, 1)}
	w, err := nr.cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		nr.t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					g.mu.Lock()
					if ctx.Err() == nil {
						g.err = fmt.Errorf("the watch of %s's pods closed", name)
					}
					g.mu.Unlock()
					g.notify()
					return
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod || ev.Type == watch.Deleted {
					continue
				}
				g.see(p)
			}
		}
	}()
	return g
}

func (g *gangWatch) stop() { g.cancel() }

func (g *gangWatch) notify() {
	select {
	case g.change <- struct{}{}:
	default:
	}
}

func (g *gangWatch) see(p *corev1.Pod) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.pods[p.Name]
	if s == nil {
		s = &podSeen{}
		g.pods[p.Name] = s
	}
	if p.Spec.NodeName != "" && s.bound.IsZero() {
		s.node, s.bound = p.Spec.NodeName, now
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		if s.running.IsZero() {
			s.running = now
		}
	case corev1.PodSucceeded:
		if s.running.IsZero() {
			s.running = now
		}
		if s.succeeded.IsZero() {
			s.succeeded = now
		}
	case corev1.PodFailed:
		s.failed = fmt.Sprintf("pod %s failed on %s: %+v", p.Name, p.Spec.NodeName, p.Status.ContainerStatuses)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			s.unschedulable = c.Message
		}
	}
	g.notify()
}

// until waits until ok holds for the pods seen (under the lock), failing on a failed pod.
func (g *gangWatch) until(what string, timeout time.Duration, ok func() bool) {
	g.t.Helper()
	deadline := time.After(timeout)
	for {
		g.mu.Lock()
		done, err := ok(), g.err
		for _, s := range g.pods {
			if s.failed != "" && err == nil {
				err = fmt.Errorf("%s", s.failed)
			}
		}
		state := g.describe()
		g.mu.Unlock()
		if err != nil {
			g.t.Fatalf("%s: %v", g.name, err)
		}
		if done {
			return
		}
		select {
		case <-g.change:
		case <-time.After(time.Second):
		case <-deadline:
			g.t.Fatalf("%s: %s not seen after %s; pods: %s", g.name, what, timeout, state)
		}
	}
}

func (g *gangWatch) describe() string {
	var out []string
	for n, s := range g.pods {
		out = append(out, fmt.Sprintf("%s node=%q running=%v succeeded=%v unschedulable=%q", n, s.node, !s.running.IsZero(), !s.succeeded.IsZero(), s.unschedulable))
	}
	return strings.Join(out, "; ")
}

// waitCondition waits until a pod's PodScheduled=False message contains want and returns it.
func (g *gangWatch) waitCondition(want string, timeout time.Duration) string {
	var msg string
	g.until(fmt.Sprintf("a PodScheduled=False message naming %q", want), timeout, func() bool {
		for _, s := range g.pods {
			if strings.Contains(s.unschedulable, want) {
				msg = s.unschedulable
				return true
			}
		}
		return false
	})
	return msg
}

func (g *gangWatch) count(f func(*podSeen) bool) int {
	n := 0
	for _, s := range g.pods {
		if f(s) {
			n++
		}
	}
	return n
}

func (g *gangWatch) waitRunning(n int, timeout time.Duration) {
	g.until(fmt.Sprintf("%d pods Running", n), timeout, func() bool { return g.count(func(s *podSeen) bool { return !s.running.IsZero() }) >= n })
}

func (g *gangWatch) waitSucceeded(n int, timeout time.Duration) {
	g.until(fmt.Sprintf("%d pods Succeeded", n), timeout, func() bool { return g.count(func(s *podSeen) bool { return !s.succeeded.IsZero() }) >= n })
}

func (g *gangWatch) waitBoundTo(node string, timeout time.Duration) {
	g.until("a pod bound to "+node, timeout, func() bool { return g.count(func(s *podSeen) bool { return s.node == node }) > 0 })
}

func (g *gangWatch) waitRunningOn(node string, n int, timeout time.Duration) {
	g.until(fmt.Sprintf("%d pods Running on %s", n, node), timeout, func() bool {
		return g.count(func(s *podSeen) bool { return s.node == node && !s.running.IsZero() }) >= n
	})
}

func (g *gangWatch) locked(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}

func (g *gangWatch) boundCount() (n int) {
	g.locked(func() { n = g.count(func(s *podSeen) bool { return s.node != "" }) })
	return n
}

func (g *gangWatch) podCount() (n int) {
	g.locked(func() { n = len(g.pods) })
	return n
}

func (g *gangWatch) bindings() map[string]string {
	out := map[string]string{}
	g.locked(func() {
		for n, s := range g.pods {
			out[n] = s.node
		}
	})
	return out
}

func (g *gangWatch) perNode() map[string]int {
	out := map[string]int{}
	g.locked(func() {
		for _, s := range g.pods {
			if s.node != "" {
				out[s.node]++
			}
		}
	})
	return out
}

// extreme is the earliest (first) or latest time f picks among the pods.
func (g *gangWatch) extreme(f func(*podSeen) time.Time, first bool) time.Time {
	var out time.Time
	g.locked(func() {
		for _, s := range g.pods {
			v := f(s)
			if out.IsZero() || first && v.Before(out) || !first && v.After(out) {
				out = v
			}
		}
	})
	return out
}

func (g *gangWatch) firstBoundAt() time.Time {
	return g.extreme(func(s *podSeen) time.Time { return s.bound }, true)
}
func (g *gangWatch) allBoundAt() time.Time {
	return g.extreme(func(s *podSeen) time.Time { return s.bound }, false)
}
func (g *gangWatch) allRunningAt() time.Time {
	return g.extreme(func(s *podSeen) time.Time { return s.running }, false)
}
func (g *gangWatch) allSucceededAt() time.Time {
	return g.extreme(func(s *podSeen) time.Time { return s.succeeded }, false)
}
