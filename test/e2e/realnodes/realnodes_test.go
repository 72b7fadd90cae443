//go:build e2e && realnodes

// Package realnodes tests the real-node mode of the local cluster (hack/localcluster up --real-nodes):
// it starts a cluster with two kubelets on containerd, runs a pod of the worker image to completion,
// kills everything with SIGKILL, starts again, and checks that `down` leaves no process, mount,
// network interface, iptables chain, cgroup or sysctl change behind. It needs root, the node tools
// (make node-tools), the images (make images) and hack/realnodes-prereqs.sh; it is not part of
// `make test` (build tag realnodes; docs/development.md, "Real nodes").
//
//	nice -n 19 go test -tags e2e,realnodes -count=1 -timeout 20m ./test/e2e/realnodes/
package realnodes

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

const portBase = 18443

// net/ipv4/ip_forward: the CNI bridge plugin with isGateway switched it on for the whole host.
var sysctls = []string{"net/ipv4/ip_forward", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func TestRealNodesUpPodKillUpDown(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "e2e-realnodes")
	lc := filepath.Join(t.TempDir(), "localcluster")
	build := exec.Command("go", "build", "-o", lc, "./hack/localcluster")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localcluster: %v\n%s", err, out)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(lc, args...)
		cmd.Dir = root
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		return b.String(), err
	}
	before := readSysctls(t)
	upArgs := []string{"up", "--real-nodes", "2", "--nodes", "4", "--no-volcano", "--no-jobset", "--dir", dir, "--port-base", strconv.Itoa(portBase), "--bin", filepath.Join(root, "bin")}
	downed := false
	t.Cleanup(func() {
		if !downed {
			out, _ := run("down", "--dir", dir)
			t.Logf("cleanup down:\n%s", out)
		}
	})

	start := time.Now()
	out, err := run(upArgs...)
	if err != nil {
		t.Fatalf("first up: %v\n%s", err, out)
	}
	t.Logf("first up in %s", time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(out, "real-node demo passed") {
		t.Fatalf("first up did not run the real-node demo:\n%s", out)
	}

	cs := clientset(t, filepath.Join(dir, "kubeconfig"))
	runWorker(t, cs, "rank-check", "7")
	checkAPIFromPod(t, cs)
	checkServiceFromPod(t, cs)
	checkLoadImages(t, root, dir, run)

	// kill -9 of everything: every recorded process, then every process below dir (shims, whose
	// containers then die with their PID namespace's init gone or stay for the next up to remove).
	killAll(t, dir)
	start = time.Now()
	out, err = run(upArgs...)
	if err != nil {
		t.Fatalf("up after kill -9: %v\n%s", err, out)
	}
	t.Logf("second up (after kill -9) in %s", time.Since(start).Round(100*time.Millisecond))
	runWorker(t, clientset(t, filepath.Join(dir, "kubeconfig")), "after-kill", "1")

	out, err = run("down", "--dir", dir)
	downed = true
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := leftovers(dir); len(left) > 0 {
		t.Fatalf("down left behind:\n  %s\ndown said:\n%s", strings.Join(left, "\n  "), out)
	}
	if after := readSysctls(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("sysctls after down %v, before up %v", after, before)
	}
}

// checkLoadImages: load-images (what `make images` runs) fails naming the image whose archive is
// missing, and with every archive, each node's containerd lists the three images, pinned.
func checkLoadImages(t *testing.T, root, dir string, run func(...string) (string, error)) {
	t.Helper()
	partial := t.TempDir()
	for _, a := range []string{"pause.tar", "hyperbatch.tar"} {
		if err := os.Symlink(filepath.Join(root, "_output", "images", a), filepath.Join(partial, a)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run("load-images", "--dir", dir, "--images", partial)
	if err == nil || !strings.Contains(out, "image hyperbatch.local/worker:dev") {
		t.Fatalf("load-images without worker.tar: err %v, want a failure naming hyperbatch.local/worker:dev:\n%s", err, out)
	}
	start := time.Now()
	if out, err := run("load-images", "--dir", dir); err != nil {
		t.Fatalf("load-images: %v\n%s", err, out)
	}
	t.Logf("load-images (3 archives into 2 containerds) in %s", time.Since(start).Round(100*time.Millisecond))
	for i := 0; i < 2; i++ {
		sock := filepath.Join(dir, "nodes", fmt.Sprintf("real-node-%d", i), "containerd.sock")
		ls, err := exec.Command(filepath.Join(root, "bin", "ctr"), "--address", sock, "--namespace", "k8s.io", "images", "ls").CombinedOutput()
		if err != nil {
			t.Fatalf("ctr images ls on real-node-%d: %v\n%s", i, err, ls)
		}
		for _, ref := range []string{"hyperbatch.local/pause:dev", "hyperbatch.local/worker:dev", "hyperbatch.local/hyperbatch:dev"} {
			found := false
			for _, line := range strings.Split(string(ls), "\n") {
				if strings.HasPrefix(line, ref+" ") && strings.Contains(line, "io.cri-containerd.pinned=pinned") {
					found = true
				}
			}
			if !found {
				t.Errorf("real-node-%d's containerd does not list %s pinned:\n%s", i, ref, ls)
			}
		}
	}
}

func clientset(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// runWorker runs a pod of the worker image on a real node with RANK=rank and checks that it
// succeeds and that its log, read through the API server from the kubelet, reports the rank.
func runWorker(t *testing.T, cs *kubernetes.Clientset, name, rank string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName:                "hyperbatch-scheduler",
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "worker", Image: e2efw.WorkerImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--duration=2s"}, Env: []corev1.EnvVar{{Name: "RANK", Value: rank}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
			}},
		},
	}
	real, err := e2efw.ParseNodes(string(e2efw.RealNodes))
	if err != nil {
		t.Fatal(err)
	}
	real.Apply(&pod.Spec)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s failed: %+v", name, p.Status.ContainerStatuses)
		}
		if p.Status.Phase == corev1.PodSucceeded {
			cst := p.Status.ContainerStatuses[0]
			if !strings.HasPrefix(cst.ContainerID, "containerd://") || cst.State.Terminated == nil || cst.State.Terminated.ExitCode != 0 {
				t.Fatalf("pod %s succeeded without a containerd container exiting 0: %+v", name, cst)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s is %s on %q after 2m: %+v", name, p.Status.Phase, p.Spec.NodeName, p.Status)
		case <-time.After(300 * time.Millisecond):
		}
	}
	logs, err := cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s (API server -> kubelet): %v", name, err)
	}
	if want := "worker: rank " + rank; !strings.Contains(string(logs), want) {
		t.Fatalf("logs of %s lack %q:\n%s", name, want, logs)
	}
}

// checkAPIFromPod: the kubernetes Service points at the API server's address on the bridge, and a
// pod's in-cluster client reaches it through the Service's ClusterIP (10.96.0.1:443): TLS verified
// against the serving certificate's SANs, and the pod's service-account token authenticated. The
// pod runs hyperbatch's manager as the namespace's default service account, which may do nothing,
// so the first request it makes comes back forbidden naming that account: an answer only the API
// server gives (before, the pod timed out dialing 10.96.0.1, which had no endpoints).
func checkAPIFromPod(t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	slice, err := cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the kubernetes Service's EndpointSlice: %v", err)
	}
	if len(slice.Endpoints) != 1 || len(slice.Endpoints[0].Addresses) != 1 || slice.Endpoints[0].Addresses[0] != "10.244.0.1" {
		t.Fatalf("the kubernetes Service's endpoints are %+v, want the bridge gateway 10.244.0.1", slice.Endpoints)
	}
	const name = "api-from-pod"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			// No schedulerName: the real nodes' kube-scheduler (default-scheduler) places it, as it
			// places the Helm chart's pods.
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "manager", Image: e2efw.HyperbatchImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/manager"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
			}},
		},
	}
	real, err := e2efw.ParseNodes(string(e2efw.RealNodes))
	if err != nil {
		t.Fatal(err)
	}
	real.Apply(&pod.Spec)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	defer func() {
		_ = cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	waitScheduledBy(ctx, t, cs, name, "default-scheduler")
	const want = `User \"system:serviceaccount:default:default\" cannot`
	var logs []byte
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodFailed {
			if logs, err = cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil && strings.Contains(string(logs), want) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s (%s on %q) never got an answer from the API server through 10.96.0.1 (want %s in its log):\n%s", name, p.Status.Phase, p.Spec.NodeName, want, logs)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitScheduledBy waits for the pod's Scheduled event and checks which scheduler reported it.
func waitScheduledBy(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, pod, scheduler string) {
	t.Helper()
	for {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=Scheduled"})
		if err == nil && len(evs.Items) > 0 {
			e := evs.Items[0]
			got := e.ReportingController
			if got == "" {
				got = e.Source.Component
			}
			if got != scheduler {
				t.Fatalf("pod %s was scheduled by %q, want %s: %s", pod, got, scheduler, e.Message)
			}
			return
		}
		select {
		case <-ctx.Done():
			p, _ := cs.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
			t.Fatalf("pod %s has no Scheduled event from %s (a pod naming no scheduler needs the real nodes' kube-scheduler): %v %+v", pod, scheduler, err, p.Status)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// managerPod is a pod of hyperbatch's image running /manager on a real node as the namespace's
// default service account.
func managerPod(name string, labels map[string]string, env []corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: "hyperbatch-scheduler",
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "manager", Image: e2efw.HyperbatchImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/manager"}, Env: env,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
			}},
		},
	}
}

// checkServiceFromPod: a pod reaches a ClusterIP whose endpoint is another pod (kube-proxy DNATs the
// packet, the host forwards it hb0 -> hb0). The target pod runs the manager, whose health endpoint
// serves plain HTTP on :8081; the Service maps 443 to it. The client pod runs the manager with
// KUBERNETES_SERVICE_HOST/PORT naming that Service, so its in-cluster client speaks TLS to the
// health endpoint and logs that the server answered in HTTP: only a TCP connection that reached
// the target pod produces that (without forwarding it times out dialing).
func checkServiceFromPod(t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	real, err := e2efw.ParseNodes(string(e2efw.RealNodes))
	if err != nil {
		t.Fatal(err)
	}
	target := managerPod("svc-target", map[string]string{"app": "svc-target"}, nil)
	real.Apply(&target.Spec)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, target, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod svc-target: %v", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-target", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "svc-target"},
			Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8081)}}},
	}
	svc, err = cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service svc-target: %v", err)
	}
	defer func() {
		bg := context.Background()
		_ = cs.CoreV1().Services("default").Delete(bg, "svc-target", metav1.DeleteOptions{})
		for _, n := range []string{"svc-target", "svc-client"} {
			_ = cs.CoreV1().Pods("default").Delete(bg, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}()
	// Wait for the target's endpoint, so the client's first dial already has somewhere to go.
	for {
		slices, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=svc-target"})
		if err == nil && len(slices.Items) > 0 && len(slices.Items[0].Endpoints) > 0 {
			if c := slices.Items[0].Endpoints[0].Conditions.Ready; c != nil && *c {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Service svc-target has no ready endpoint after 2m: %v %+v", err, slices)
		case <-time.After(300 * time.Millisecond):
		}
	}
	client := managerPod("svc-client", nil, []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: svc.Spec.ClusterIP}, {Name: "KUBERNETES_SERVICE_PORT", Value: "443"}})
	real.Apply(&client.Spec)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod svc-client: %v", err)
	}
	var logs []byte
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "svc-client", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod svc-client: %v", err)
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodFailed {
			logs, err = cs.CoreV1().Pods("default").GetLogs("svc-client", &corev1.PodLogOptions{}).DoRaw(ctx)
			if err == nil && (strings.Contains(string(logs), "server gave HTTP response to HTTPS client") || strings.Contains(string(logs), "first record does not look like a TLS handshake")) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod svc-client (%s on %q) never reached svc-target's HTTP server through ClusterIP %s:443:\n%s", p.Status.Phase, p.Spec.NodeName, svc.Spec.ClusterIP, logs)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func killAll(t *testing.T, dir string) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, p := range processesBelow(dir) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// The kills are asynchronous: a killed process holds its listening sockets until all its threads
	// have exited. Wait until the cluster's ports can be bound again, as a user would before the next up.
	start := time.Now()
	for {
		busy := 0
		for p := portBase; p < portBase+60; p++ {
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err != nil {
				busy++
			} else {
				_ = ln.Close()
			}
		}
		if busy == 0 && len(processesBelow(dir)) == 0 {
			t.Logf("kill -9: processes gone and ports free after %s", time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("kill -9: %d ports still busy and processes %v alive after 1m", busy, processesBelow(dir))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func processesBelow(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir+"/") {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
				if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
					continue
				}
			}
			out = append(out, pid)
		}
	}
	return out
}

// leftovers lists what the real nodes made and down should have removed.
func leftovers(dir string) []string {
	var left []string
	if p := processesBelow(dir); len(p) > 0 {
		left = append(left, fmt.Sprintf("processes %v", p))
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	if _, err := os.Stat("/sys/class/net/hb0"); err == nil {
		left = append(left, "interface hb0")
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/hyperbatch-real-*"); len(cg) > 0 {
		left = append(left, "cgroups "+strings.Join(cg, " "))
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := exec.Command(save).Output()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, ":KUBE-") || strings.HasPrefix(line, ":CNI-") || strings.HasPrefix(line, ":HB-REAL-") ||
				strings.Contains(line, "-j KUBE-") || strings.Contains(line, "-j CNI-") || strings.Contains(line, "-j HB-REAL-") {
				left = append(left, save+": "+line)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes")); err == nil {
		left = append(left, "directory "+filepath.Join(dir, "nodes"))
	}
	return left
}

func readSysctls(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range sysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

// TestRealNodesPreflight: a missing prerequisite stops `up` before anything starts, naming it and
// its fix: runc and iptables off PATH, a kubelet port in use, an image archive missing, and a bridge
// hb0 this directory did not make.
func TestRealNodesPreflight(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/class/net/hb0"); err == nil {
		t.Fatal("a real-node cluster runs on this machine (hb0 exists): stop it first")
	}
	lc := filepath.Join(t.TempDir(), "localcluster")
	build := exec.Command("go", "build", "-o", lc, "./hack/localcluster")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hack/localcluster: %v\n%s", err, out)
	}
	dir := t.TempDir()
	const base = portBase + 200
	up := func(env []string, extra ...string) string {
		t.Helper()
		args := append([]string{"up", "--real-nodes", "2", "--nodes", "1", "--dir", dir, "--port-base", strconv.Itoa(base), "--bin", filepath.Join(root, "bin")}, extra...)
		cmd := exec.Command(lc, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("up %v succeeded, want a preflight failure:\n%s", extra, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "pids")); err == nil {
			if pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid")); len(pids) > 0 {
				t.Fatalf("up %v started processes before failing: %v", extra, pids)
			}
		}
		return string(out)
	}
	wants := func(out string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				t.Errorf("up's error lacks %q:\n%s", s, out)
			}
		}
	}

	// An empty PATH hides runc and iptables (and ip and mount).
	wants(up([]string{"PATH=" + t.TempDir()}), "runc: install Debian's runc: hack/realnodes-prereqs.sh", "iptables: install Debian's iptables")

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+40+1)))
	if err != nil {
		t.Fatal(err)
	}
	wants(up(nil), fmt.Sprintf("port 127.0.0.1:%d (real-node-0 kubelet healthzPort)", base+41))
	_ = ln.Close()

	wants(up(nil, "--images", t.TempDir()), "image hyperbatch.local/worker:dev: no ", "run `make images`")

	if out, err := exec.Command("ip", "link", "add", "hb0", "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("ip link add hb0: %v\n%s", err, out)
	}
	defer func() { _ = exec.Command("ip", "link", "del", "hb0").Run() }()
	wants(up(nil), "network interface hb0: it exists but "+filepath.Join(dir, "nodes")+" did not make it")
	if _, err := os.Stat("/sys/class/net/hb0"); err != nil {
		t.Fatal("up removed a bridge it did not make")
	}
}
