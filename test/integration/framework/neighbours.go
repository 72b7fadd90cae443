package framework

// Neighbours are the upstream workload controllers hyperbatch runs next to in a user's cluster: Volcano's
// controller-manager and scheduler and the JobSet controller, built by hack/tools.sh into bin/
// (vc-controller-manager, vc-scheduler, jobset-controller). The helpers here start them against any
// kubeconfig (an envtest control plane, the e2e local cluster) with their log in a file, wait until they
// serve, and stop them cleanly.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// VolcanoControllers are the controllers of Volcano's controller-manager hyperbatch's tests and local
// cluster run: Jobs (PodGroup and pods), PodGroups (for plain pods), Queues (status) and the garbage
// collector (ttlSecondsAfterFinished).
var VolcanoControllers = []string{"job-controller", "pg-controller", "queue-controller", "gc-controller"}

// VolcanoSchedulerConfig is the scheduler configuration Volcano's Helm chart ships
// (installer/helm/chart/volcano/config/volcano-scheduler.conf in volcano.sh/volcano v1.14.0-alpha.0).
const VolcanoSchedulerConfig = `actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
`

// NeighbourOptions say where a neighbour runs.
type NeighbourOptions struct {
	// Kubeconfig of the cluster (required); WriteKubeconfig writes one for an envtest Env.
	Kubeconfig string
	// LogDir receives <name>.log and any generated config or certificates (required; t.TempDir() is fine).
	LogDir string
	// BinDir holds the binaries; default AssetsDir() (KUBEBUILDER_ASSETS or the project's bin/).
	BinDir string
	// StartTimeout bounds the wait until the process serves; default 90s.
	StartTimeout time.Duration
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// SchedulerConf is vc-scheduler's configuration (StartVolcanoScheduler only); default
	// VolcanoSchedulerConfig.
	SchedulerConf string
}

// Process is a started neighbour.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	cleanup func() // removes what the start registered with the API server
}

// StartVolcanoControllers starts vc-controller-manager with VolcanoControllers, leader election off and
// its health endpoint on a free loopback port, and waits for /healthz.
func StartVolcanoControllers(ctx context.Context, o NeighbourOptions) (*Process, error) {
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--leader-elect=false",
		"--controllers=" + strings.Join(VolcanoControllers, ","),
		"--enable-healthz=true",
		"--healthz-address=" + loopback(health),
		"--enable-metrics=false",
		"--worker-threads=2",
	}
	return start(ctx, o, "vc-controller-manager", args, httpOK("http://"+loopback(health)+"/healthz"))
}

// StartVolcanoScheduler starts vc-scheduler (schedulerName "volcano") with VolcanoSchedulerConfig.
// --enable-metrics=true is required: without it v1.14.0-alpha.0 panics on the first gang (Volcano #4729).
func StartVolcanoScheduler(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	conf, text := filepath.Join(o.LogDir, "volcano-scheduler.conf"), o.SchedulerConf
	if text == "" {
		text = VolcanoSchedulerConfig
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", conf, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	health, metrics := ports[0], ports[1]
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--leader-elect=false",
		"--scheduler-conf=" + conf,
		"--enable-healthz=true",
		"--healthz-address=" + loopback(health),
		"--enable-metrics=true",
		"--listen-address=" + loopback(metrics),
		"--schedule-period=500ms",
		"--cache-dumper=false",
	}
	return start(ctx, o, "vc-scheduler", args, httpOK("http://"+loopback(health)+"/healthz"))
}

// StartJobSetController starts jobset-controller with a configuration file: leader election and the
// metrics endpoint off, its own cert rotation off, and its webhook server on a free loopback port with a
// self-signed certificate written under LogDir. It registers the controller's JobSet mutating and
// validating webhooks with the API server (named jobset-*-webhook-configuration-<port>, removed by
// Stop): the controller relies on its defaulting webhook — without it a JobSet's spec.network stays
// nil and v0.10.1's reconciler panics (dnsHostnamesEnabled).
func StartJobSetController(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	certDir := filepath.Join(o.LogDir, "jobset-certs")
	ca, err := WriteSelfSignedCert(certDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	health, webhook := ports[0], ports[1]
	cfg := JobSetConfig(webhook, health, certDir)
	cfgPath := filepath.Join(o.LogDir, "jobset-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", cfgPath, err)
	}
	args := []string{"--kubeconfig=" + o.Kubeconfig, "--config=" + cfgPath, "--zap-log-level=info"}
	p, err := start(ctx, o, "jobset-controller", args, httpOK("http://"+loopback(health)+"/readyz"))
	if err != nil {
		return nil, err
	}
	cleanup, err := registerJobSetWebhooks(ctx, o.Kubeconfig, loopback(webhook), ca)
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.cleanup = cleanup
	return p, nil
}

// TrainerNamespace, TrainerWebhookSecret and TrainerWebhookConfiguration are what Kubeflow Trainer
// v2.0.0's controller manager expects to exist (pkg/util/cert, cmd/trainer-controller-manager, as its
// manifests create them): it writes its webhook certificate into that Secret of the namespace it runs
// in (kubeflow-system outside a pod) and injects its CA into that ValidatingWebhookConfiguration.
// StartTrainerController creates all three.
const (
	TrainerNamespace            = "kubeflow-system"
	TrainerWebhookSecret        = "kubeflow-trainer-webhook-cert"
	TrainerWebhookConfiguration = "validator.trainer.kubeflow.org"
)

// StartTrainerController starts Kubeflow Trainer's controller manager (trainer-controller-manager,
// github.com/kubeflow/trainer/v2 v2.0.0): its TrainJob controller turns TrainJobs into JobSets. The
// namespace, Secret and webhook configuration it expects are created first; the configuration has no
// webhooks, so the apiserver never calls Trainer's validating webhooks (their certificate is for a
// Service name, not loopback) and TrainJobs are admitted unvalidated. Its webhook server and probes
// listen on free loopback ports; its certificate is copied from its Secret into the fixed directory
// the binary reads (TrainerCertDir), as a kubelet would mount it.
func StartTrainerController(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", o.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", o.Kubeconfig, err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TrainerNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s for Trainer: %w", TrainerNamespace, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: TrainerNamespace, Name: TrainerWebhookSecret}}
	if _, err := cs.CoreV1().Secrets(TrainerNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Secret %s/%s for Trainer: %w", TrainerNamespace, TrainerWebhookSecret, err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: TrainerWebhookConfiguration}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ValidatingWebhookConfiguration %s for Trainer: %w", TrainerWebhookConfiguration, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	health, webhook := ports[0], ports[1]
	args := []string{"--kubeconfig=" + o.Kubeconfig, "--health-probe-bind-address=" + loopback(health),
		"--webhook-server-port=" + strconv.Itoa(webhook), "--metrics-bind-address=0", "--zap-log-level=info"}
	// Trainer's cert rotator writes the certificate into the Secret and then waits (backing off up to
	// minutes) for the files in its fixed directory, where a pod would have the Secret mounted; play
	// the kubelet's part while the process starts.
	mounted := make(chan error, 1)
	mountCtx, stopMount := context.WithCancel(ctx)
	defer stopMount()
	go func() { mounted <- mountSecret(mountCtx, cs, TrainerNamespace, TrainerWebhookSecret, TrainerCertDir) }()
	p, err := start(ctx, o, "trainer-controller-manager", args, httpOK("http://"+loopback(health)+"/readyz"))
	if err != nil {
		stopMount()
		if merr := <-mounted; merr != nil && !errors.Is(merr, context.Canceled) {
			return nil, fmt.Errorf("%w (and mounting its certificate: %w)", err, merr)
		}
		return nil, err
	}
	return p, nil
}

// TrainerCertDir is where Trainer v2.0.0's controller manager reads its webhook certificate (fixed in
// its pkg/util/cert).
const TrainerCertDir = "/tmp/k8s-webhook-server/serving-certs"

// mountSecret waits until the Secret holds tls.crt and tls.key and writes its keys as files into dir,
// as a kubelet mounts a Secret volume.
func mountSecret(ctx context.Context, cs kubernetes.Interface, namespace, name, dir string) error {
	for {
		s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("creating %s: %w", dir, err)
			}
			for k, v := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(dir, k), err)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// registerJobSetWebhooks registers the JobSet webhooks (paths and rules from the kubebuilder markers
// of sigs.k8s.io/jobset v0.10.1 pkg/webhooks/jobset_webhook.go) in URL mode and returns their removal.
func registerJobSetWebhooks(ctx context.Context, kubeconfig, addr string, ca []byte) (func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	suffix := strings.ReplaceAll(addr, ":", "-")
	rules := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"jobset.x-k8s.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{"jobsets"}}}}
	}
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := "https://" + addr + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
	}
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-mutating-webhook-configuration-" + suffix},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mjobset.kb.io",
			ClientConfig: cc("/mutate-jobset-x-k8s-io-v1alpha2-jobset"), Rules: rules(admissionregistrationv1.Create),
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-validating-webhook-configuration-" + suffix},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "vjobset.kb.io",
			ClientConfig: cc("/validate-jobset-x-k8s-io-v1alpha2-jobset"), Rules: rules(admissionregistrationv1.Create, admissionregistrationv1.Update),
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}
	adm := cs.AdmissionregistrationV1()
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("registering JobSet's mutating webhook: %w", err)
	}
	if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		_ = adm.MutatingWebhookConfigurations().Delete(ctx, mwc.Name, metav1.DeleteOptions{})
		return nil, fmt.Errorf("registering JobSet's validating webhook: %w", err)
	}
	return func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = adm.MutatingWebhookConfigurations().Delete(dctx, mwc.Name, metav1.DeleteOptions{})
		_ = adm.ValidatingWebhookConfigurations().Delete(dctx, vwc.Name, metav1.DeleteOptions{})
	}, nil
}

// JobSetConfig is the JobSet controller's configuration (config.jobset.x-k8s.io/v1alpha1) for a process
// outside a cluster: no internal cert management (it would need a Service and a Secret), no leader
// election, metrics off, webhook server on 127.0.0.1:webhookPort serving tls.crt/tls.key from certDir.
func JobSetConfig(webhookPort, healthPort int, certDir string) string {
	return fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: %q
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
`, loopback(healthPort), webhookPort, certDir)
}

func (o *NeighbourOptions) check() error {
	if o.Kubeconfig == "" || o.LogDir == "" {
		return errors.New("framework: NeighbourOptions needs Kubeconfig and LogDir")
	}
	if o.BinDir == "" {
		o.BinDir = AssetsDir()
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	return os.MkdirAll(o.LogDir, 0o755)
}

// StartProcess starts any binary of o.BinDir (name) with args, its log in o.LogDir/<name>.log, and waits
// until ready passes (HTTPReady, for instance); the helpers above are built on it.
func StartProcess(ctx context.Context, o NeighbourOptions, name string, args []string, ready func(context.Context) error) (*Process, error) {
	return start(ctx, o, name, args, ready)
}

// HTTPReady is a readiness check for StartProcess: url answers 200 (plain HTTP).
func HTTPReady(url string) func(context.Context) error { return httpOK(url) }

// FreePort is a free TCP port on 127.0.0.1.
func FreePort() (int, error) { return freePort() }

func start(ctx context.Context, o NeighbourOptions, name string, args []string, ready func(context.Context) error) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	bin := filepath.Join(o.BinDir, name)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing from %s: run 'hack/tools.sh %s' (or 'make test-tools'): %w", name, o.BinDir, name, err)
	}
	p := &Process{Name: name, LogPath: filepath.Join(o.LogDir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating log %s: %w", p.LogPath, err)
	}
	defer func() { _ = logFile.Close() }()
	args = append(args, o.ExtraArgs...)
	_, _ = fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()

	deadline := time.Now().Add(o.StartTimeout)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited during start (%w).\n%s", name, p.waitErr, p.LogTail(20))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := ready(cctx)
		cancel()
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			_ = p.Stop()
			return nil, fmt.Errorf("%s did not become ready within %s (last check: %w).\n%s", name, o.StartTimeout, err, p.LogTail(20))
		}
		select {
		case <-ctx.Done():
		case <-p.done:
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM to the process group, waits up to 10s, then SIGKILLs it. Safe to call twice.
func (p *Process) Stop() error {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	if p.cleanup != nil {
		p.cleanup()
		p.cleanup = nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s ignored SIGTERM for 10s and was killed (log %s)", p.Name, p.LogPath)
	}
}

// Pid is the process id of the started binary (for /proc readings such as CPU time and peak RSS).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// CPUSeconds is the process's CPU time so far, user + system (/proc/<pid>/stat; 0 when unreadable).
func (p *Process) CPUSeconds() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks (USER_HZ = 100 on Linux)
}

// PeakRSSKiB is the process's peak resident set size so far (VmHWM in /proc/<pid>/status; 0 when
// unreadable).
func (p *Process) PeakRSSKiB() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}

// Exited reports whether the process has ended (a crash during a test shows up here).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LogTail returns the last n lines of the process's log, framed with its path.
func (p *Process) LogTail(n int) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return fmt.Sprintf("last %d lines of %s:\n    %s", len(lines), p.LogPath, strings.Join(lines, "\n    "))
}

// WriteSelfSignedCert writes tls.crt and tls.key (ECDSA P-256, valid for 127.0.0.1 and localhost, one
// year) into dir and returns the certificate PEM (usable as a caBundle).
func WriteSelfSignedCert(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing tls.crt: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("writing tls.key: %w", err)
	}
	return certPEM, nil
}

// probeClient checks the health endpoints of processes the tests start on loopback; some serve HTTPS
// with a self-signed certificate (kube-scheduler), which only liveness is asked of.
var probeClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probes

// httpOK is a readiness check: GET url answers 200 (probeClient).
func httpOK(url string) func(context.Context) error { return HTTPReadyWith(probeClient, url) }

// HTTPReadyWith is HTTPReady with the given client (e.g. one that accepts a self-signed serving
// certificate on loopback).
func HTTPReadyWith(c *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		return nil
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts finds n free loopback ports.
func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
