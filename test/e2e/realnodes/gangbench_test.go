//go:build e2e && realnodes

package realnodes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestGangRealVsKwok measures a cold `up` with two real nodes (fresh cluster directory and
// containerd roots; node tools and images already built), then the time from creating a 4-pod gang
// JobSet (2 Jobs × 2 pods, hyperbatch-scheduler, network topology hard) until all 4 pods are Running,
// on the real nodes (the worker image in containerd) and on the kwok nodes of the same cluster,
// alternating, rounds each. HYPERBATCH_BENCH_OUT names a file to write the results to
// (bench/results/realnodes.txt). HYPERBATCH_BENCH_ROUNDS sets the rounds (default 5).
func TestGangRealVsKwok(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	rounds := 5
	if v := os.Getenv("HYPERBATCH_BENCH_ROUNDS"); v != "" {
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("HYPERBATCH_BENCH_ROUNDS=%q: want a positive number", v)
		}
	}
	dir := filepath.Join(root, "_output", "bench-realnodes")
	lc := filepath.Join(t.TempDir(), "localcluster")
	build := exec.Command("go", "build", "-o", lc, "./hack/localcluster")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localcluster: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(lc, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	load := loadavg()
	start := time.Now()
	out, err := run("up", "--real-nodes", "2", "--nodes", "4", "--dir", dir, "--port-base", strconv.Itoa(portBase+100), "--bin", filepath.Join(root, "bin"))
	upTime := time.Since(start)
	t.Cleanup(func() {
		if out, err := run("down", "--dir", dir); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	var steps []string
	for _, line := range strings.Split(out, "\n") {
		for _, key := range []string{"containerd-0 ready", "imported", "real nodes Ready", "real-node demo passed", "local cluster up"} {
			if strings.Contains(line, key) {
				steps = append(steps, "#   "+strings.TrimPrefix(line, "==> "))
			}
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cs := clientset(t, kubeconfig).CoreV1().Pods("default")
	kubectl := filepath.Join(root, "bin", "kubectl")

	times := map[string][]time.Duration{}
	bound := map[string][]time.Duration{}
	for r := 0; r < rounds; r++ {
		for _, kind := range []string{"real", "kwok"} {
			name := fmt.Sprintf("gang-%s-%d", kind, r)
			b, running := gangRound(t, cs, kubectl, kubeconfig, name, kind)
			times[kind] = append(times[kind], running)
			bound[kind] = append(bound[kind], b)
			t.Logf("round %d %s: all 4 bound %s, all 4 Running %s", r, kind, b.Round(time.Millisecond), running.Round(time.Millisecond))
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# %s TestGangRealVsKwok, GOMAXPROCS=%d, %s, load average at start %s\n", time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.Version(), load)
	fmt.Fprintf(&b, "# nice -n 19 go test -tags e2e,realnodes -run TestGangRealVsKwok -count=1 -timeout 30m ./test/e2e/realnodes/ (HYPERBATCH_BENCH_ROUNDS=%d)\n", rounds)
	fmt.Fprintf(&b, "# cold up: hack/localcluster up --real-nodes 2 --nodes 4 (etcd, apiserver, controller-manager, kwok, CRDs, 2 containerds with 3 images imported, 2 kubelets, kube-proxy, manager, scheduler, Volcano, JobSet, the three acceptance checks) from a fresh directory; node tools and images already built\n")
	fmt.Fprintf(&b, "cold up with 2 real nodes      %6.1f s\n", upTime.Seconds())
	b.WriteString(strings.Join(steps, "\n") + "\n")
	fmt.Fprintf(&b, "# 4-pod gang JobSet (2 Jobs x 2 pods, hyperbatch-scheduler, networkTopology hard), create -> all 4 pods Running, %d rounds each, real and kwok alternating in one cluster; real: worker image --duration=20s in containerd; kwok: pause image, kwok's stages\n", rounds)
	for _, kind := range []string{"real", "kwok"} {
		fmt.Fprintf(&b, "%-4s nodes: bound median %6.0f ms   Running median %6.0f ms  min %6.0f  max %6.0f  (all: %s)\n", kind,
			ms(median(bound[kind])), ms(median(times[kind])), ms(minOf(times[kind])), ms(maxOf(times[kind])), list(times[kind]))
	}
	fmt.Fprintf(&b, "real/kwok create->Running (medians)   %.2fx\n", ms(median(times["real"]))/ms(median(times["kwok"])))
	t.Log("\n" + b.String())
	if f := os.Getenv("HYPERBATCH_BENCH_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gangRound creates the gang JobSet on kind's nodes and returns the times from the create until all
// 4 pods are bound and until all 4 are Running (seen on a watch opened before the create), then
// deletes it and waits until its pods are gone.
func gangRound(t *testing.T, cs podClient, kubectl, kubeconfig, name, kind string) (time.Duration, time.Duration) {
	t.Helper()
	sel, image, args := `{"hyperbatch.dev/e2e-node": "real"}`, "hyperbatch.local/worker:dev", `["--duration=20s"]`
	if kind == "kwok" {
		sel, image, args = `{"type": "kwok"}`, "registry.k8s.io/pause:3.10", `[]`
	}
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
            nodeSelector: %s
            containers:
            - name: worker
              image: %s
              args: %s
              resources: {requests: {cpu: 100m, memory: 32Mi}}
`, name, sel, image, args)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := cs.Watch(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", name, err, out)
	}
	boundAt, runningAt := map[string]time.Duration{}, map[string]time.Duration{}
	var allBound time.Duration
	for len(runningAt) < 4 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("%s: watch closed", name)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			now := time.Since(start)
			if p.Spec.NodeName != "" {
				if _, seen := boundAt[p.Name]; !seen {
					boundAt[p.Name] = now
					if len(boundAt) == 4 {
						allBound = now
					}
				}
			}
			switch p.Status.Phase {
			case corev1.PodRunning, corev1.PodSucceeded:
				if _, seen := runningAt[p.Name]; !seen {
					runningAt[p.Name] = now
				}
			case corev1.PodFailed:
				t.Fatalf("%s: pod %s failed on %s: %+v", name, p.Name, p.Spec.NodeName, p.Status.ContainerStatuses)
			}
		case <-ctx.Done():
			t.Fatalf("%s: %d of 4 pods Running after 3m (%d bound)", name, len(runningAt), len(boundAt))
		}
	}
	var last time.Duration
	for _, d := range runningAt {
		last = max(last, d)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "delete", "-f", path, "--wait=true", "--cascade=foreground").CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete %s: %v\n%s", name, err, out)
	}
	for {
		pods, err := cs.List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d pods still there after delete", name, len(pods.Items))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return allBound, last
}

type podClient interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], "/")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxOf(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func list(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = strconv.Itoa(int(ms(d)))
	}
	return strings.Join(out, " ")
}
