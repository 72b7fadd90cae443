package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// BenchmarkAdmissionPeers sends one stream of Volcano Job CREATE AdmissionReviews through Volcano's
// webhook-manager (the real vc-webhook-manager v1.14.0-alpha.0, /jobs/mutate then /jobs/validate) and
// through hyperbatch's (bin/manager with only its webhooks, /mutate-volcano-job then
// /validate-volcano-job): both separate processes on loopback serving the same self-signed
// certificate (ECDSA P-256), the same request body, the same client (HTTP/1.1, TLS 1.3), concurrency
// 64. One request is the mutate call and then the validate call, as the apiserver makes them; its
// latency ends when the validate answer has been read. Every answer is checked (allowed; a patch from
// each mutate). A third side, the floor, sends the same pairs to a no-op webhook (allowed, no patch):
// bench/webhook/noopserver, a process of its own serving through hyperbatch's review plumbing and
// net/http with the same certificate. Its p99 is the one below which no webhook can go with this
// client, loopback and two cores. Rounds run Volcano, hyperbatch, floor,
// then floor, hyperbatch, Volcano, …; each side reports its median round (by p99). Both webhooks see the Queue `bench` (Open: Volcano's queue controller opened
// it) and hyperbatch's WorkloadPolicy. Results: the admission section of bench/results/peers.txt.
func BenchmarkAdmissionPeers(b *testing.B) {
	if _, err := os.Stat(filepath.Join(framework.AssetsDir(), "vc-webhook-manager")); err != nil {
		b.Skip("vc-webhook-manager is missing: run 'hack/tools.sh vc-webhook-manager vc-controller-manager'")
	}
	mgrBin := filepath.Join(framework.RepoRoot(), "bin")
	if _, err := os.Stat(filepath.Join(mgrBin, "manager")); err != nil {
		b.Fatal("bin/manager is missing: run 'make build' first")
	}
	ctx := context.Background()
	dir := b.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(w.Config, kc); err != nil {
		b.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	ca, err := framework.WriteSelfSignedCert(certDir)
	if err != nil {
		b.Fatal(err)
	}
	openQueue(b, kc, dir)

	// Volcano's webhook-manager only injects its CA into configurations that exist; they are removed
	// at the end so nothing else in this run is routed to it.
	vport, err := framework.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	vbase := "https://127.0.0.1:" + strconv.Itoa(vport)
	cleanup := volcanoJobWebhookConfigs(b, vbase, ca)
	defer cleanup()
	vc, err := framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: filepath.Join(dir, "volcano")}, "vc-webhook-manager", []string{
		"--kubeconfig=" + kc, "--listen-address=127.0.0.1", "--port=" + strconv.Itoa(vport), "--webhook-url=" + vbase,
		"--tls-cert-file=" + filepath.Join(certDir, "tls.crt"), "--tls-private-key-file=" + filepath.Join(certDir, "tls.key"),
		"--ca-cert-file=" + filepath.Join(certDir, "tls.crt"), "--enabled-admission=/jobs/mutate,/jobs/validate", "--enable-healthz=false",
	}, localproc.TLSAnswersCA(ca, vbase+"/jobs/mutate"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = vc.Stop() }()

	hport, err := framework.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	health, err := framework.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	hbase := "https://127.0.0.1:" + strconv.Itoa(hport)
	hb, err := framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: filepath.Join(dir, "hyperbatch"), BinDir: mgrBin}, "manager", []string{
		"--kubeconfig=" + kc, "--controllers=", "--leader-elect=false", "--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health), "--cert-mode=external", "--webhook-cert-dir=" + certDir,
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(hport),
	}, framework.HTTPReady("http://127.0.0.1:"+strconv.Itoa(health)+"/readyz"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = hb.Stop() }()

	// The floor: bench/webhook/noopserver, built here, serving the same certificate.
	floorBin := filepath.Join(dir, "floor-bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(floorBin, "noopserver"), "./noopserver").CombinedOutput(); err != nil {
		b.Fatalf("building the floor server: %v\n%s", err, out)
	}
	fport, err := framework.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	fbase := "https://127.0.0.1:" + strconv.Itoa(fport)
	floor, err := framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: filepath.Join(dir, "floor"), BinDir: floorBin}, "noopserver",
		[]string{"--listen=127.0.0.1:" + strconv.Itoa(fport), "--cert-dir=" + certDir}, localproc.TLSAnswersCA(ca, fbase+"/noop"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = floor.Stop() }()

	job := vcjob()
	job.Spec.Queue = "bench" // both validators check the queue: Volcano's that it exists and is Open
	body := review(b, job, metav1.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"},
		metav1.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"})
	pairs := requests / 2
	if n, err := strconv.Atoi(os.Getenv("HB_PEERS_PAIRS")); err == nil && n > 0 { // smoke runs
		pairs = n
	}
	c := tlsClient(b, ca)
	sides := []peerSide{
		{name: "volcano", base: vbase, mutate: "/jobs/mutate", validate: "/jobs/validate", proc: vc, patches: true},
		{name: "hyperbatch", base: hbase, mutate: hbwebhook.MutateVolcanoJobPath, validate: hbwebhook.ValidateVolcanoJobPath, proc: hb, patches: true},
		// The floor: a no-op webhook (allowed, no patch) for both calls.
		{name: "floor", base: fbase, mutate: "/noop", validate: "/noop", proc: floor},
	}
	for _, s := range sides {
		if err := checkWholeAt(c, s.base+s.mutate, body, s.patches); err != nil {
			b.Fatalf("%s mutate: %v\n%s", s.name, err, s.proc.LogTail(20))
		}
		if err := checkWholeAt(c, s.base+s.validate, body, false); err != nil {
			b.Fatalf("%s validate: %v\n%s", s.name, err, s.proc.LogTail(20))
		}
		loadPairs(c, s, body, min(pairs, 2000)) // warm connections and caches
	}
	for i := 0; i < b.N; i++ {
		runs := make([][]pairStats, len(sides))
		for r := 0; r < rounds; r++ {
			order := []int{0, 1, 2}
			if r%2 == 1 {
				order = []int{2, 1, 0}
			}
			for _, k := range order {
				runs[k] = append(runs[k], loadPairs(c, sides[k], body, pairs))
			}
		}
		var lines []string
		med := make([]pairStats, len(sides))
		for k, s := range sides {
			sort.Slice(runs[k], func(i, j int) bool { return runs[k][i].p99 < runs[k][j].p99 })
			med[k] = runs[k][len(runs[k])/2]
			m := med[k]
			b.ReportMetric(ms(m.p99), s.name+"-p99-ms")
			b.ReportMetric(m.rps, s.name+"-req/s")
			if m.failures > 0 {
				b.Errorf("%s: %d failed requests", s.name, m.failures)
			}
			lines = append(lines, fmt.Sprintf("%-10s p50 %6.2f ms  p99 %6.2f ms  %7.0f req/s (mutate+validate pairs)  mutate p99 %6.2f ms  validate p99 %6.2f ms  server CPU %.2f ms/request  failures %d",
				s.name, ms(m.p50), ms(m.p99), m.rps, ms(m.mutateP99), ms(m.validateP99), m.cpuMsPerReq, m.failures))
		}
		ratio := ms(med[1].p99) / ms(med[0].p99)
		b.ReportMetric(ratio, "hyperbatch/volcano-p99")
		b.ReportMetric(ms(med[2].p99)/ms(med[0].p99), "floor/volcano-p99")
		lines = append(lines, fmt.Sprintf("ratio hyperbatch/volcano: p99 %.2fx (goal <= 0.50x), req/s %.2fx, p50 %.2fx, server CPU per request %.2fx",
			ratio, med[1].rps/med[0].rps, ms(med[1].p50)/ms(med[0].p50), med[1].cpuMsPerReq/med[0].cpuMsPerReq),
			fmt.Sprintf("ratio floor/volcano:      p99 %.2fx, req/s %.2fx, server CPU per request %.2fx (a no-op webhook's pairs: the least p99 any webhook reaches here); hyperbatch/floor p99 %.2fx",
				ms(med[2].p99)/ms(med[0].p99), med[2].rps/med[0].rps, med[2].cpuMsPerReq/med[0].cpuMsPerReq, ratio/(ms(med[2].p99)/ms(med[0].p99))))
		mu.Lock()
		peerPairs, peerLines = pairs, lines
		mu.Unlock()
	}
}

var (
	peerLines []string
	peerPairs int
)

type peerSide struct {
	name, base, mutate, validate string
	proc                         *framework.Process
	patches                      bool // the mutate call answers with a patch
}

type pairStats struct {
	p50, p99, mutateP99, validateP99 time.Duration
	rps, cpuMsPerReq                 float64
	failures                         int64
}

// loadPairs sends n mutate+validate pairs from `concurrency` workers.
func loadPairs(c *http.Client, s peerSide, body []byte, n int) pairStats {
	lat, mut, val := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	var failures atomic.Int64
	cpu0 := s.proc.CPUSeconds()
	elapsed := parallel(n, func() func(int) {
		var buf bytes.Buffer
		call := func(path string, wantPatch bool) error {
			buf.Reset()
			resp, err := c.Post(s.base+path, "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			_, err = buf.ReadFrom(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return err
			}
			return checkAnswer(resp.StatusCode, buf.Bytes(), wantPatch)
		}
		return func(i int) {
			t := time.Now()
			err := call(s.mutate, s.patches)
			mut[i] = time.Since(t)
			if err == nil {
				t2 := time.Now()
				err = call(s.validate, false)
				val[i] = time.Since(t2)
			}
			lat[i] = time.Since(t)
			if err != nil {
				failures.Add(1)
			}
		}
	})
	cpu := s.proc.CPUSeconds() - cpu0
	q := func(ds []time.Duration, p int) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)*p/100]
	}
	return pairStats{p50: q(lat, 50), p99: q(lat, 99), mutateP99: q(mut, 99), validateP99: q(val, 99),
		rps: float64(n) / elapsed.Seconds(), cpuMsPerReq: 1000 * cpu / float64(n), failures: failures.Load()}
}

// openQueue creates the Volcano Queue `bench` and runs Volcano's controller-manager until its queue
// controller has opened it (Volcano's Job validation admits only Jobs of an Open Queue).
func openQueue(b *testing.B, kc, dir string) {
	ctx := context.Background()
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: benchNS}, Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(true)}}
	if err := w.Client.Create(ctx, q); err != nil && !strings.Contains(err.Error(), "already exists") {
		b.Fatal(err)
	}
	p, err := framework.StartVolcanoControllers(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: filepath.Join(dir, "vc-controllers")})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Stop() }()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := w.Client.Get(ctx, client.ObjectKeyFromObject(q), q)
		return err == nil && q.Status.State == schedulingv1beta1.QueueStateOpen, nil
	}); err != nil {
		b.Fatalf("Queue %s never Open: %v\n%s", benchNS, err, p.LogTail(20))
	}
}

// volcanoJobWebhookConfigs creates the configurations Volcano's Helm chart installs for the Job
// webhooks (localproc.VolcanoWebhookConfigs, the Job ones), in URL mode, and returns their removal.
func volcanoJobWebhookConfigs(b *testing.B, base string, ca []byte) func() {
	ctx := context.Background()
	var objs []client.Object
	for _, o := range localproc.VolcanoWebhookConfigs(strings.TrimPrefix(base, "https://"), ca, "", nil) {
		if strings.HasPrefix(o.GetName(), "volcano-admission-service-jobs-") {
			objs = append(objs, o)
		}
	}
	if len(objs) != 2 {
		b.Fatalf("want Volcano's two Job webhook configurations, have %d", len(objs))
	}
	for _, o := range objs {
		if err := w.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		for _, o := range objs {
			_ = w.Client.Delete(ctx, o)
		}
	}
}
