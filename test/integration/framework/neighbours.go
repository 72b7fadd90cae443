package framework

// Neighbours are the upstream workload controllers hyperbatch runs next to in a user's cluster: Volcano's
// controller-manager and scheduler, the JobSet controller and Kubeflow Trainer's controller manager,
// built by hack/tools.sh into bin/ (vc-controller-manager, vc-scheduler, jobset-controller,
// trainer-controller-manager). The helpers here start them against any
// kubeconfig (an envtest control plane, the e2e local cluster) with their log in a file, wait until they
// serve, and stop them cleanly.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// VolcanoControllers are the controllers of Volcano's controller-manager hyperbatch's tests and local
// clusters run (localproc.VolcanoControllers).
var VolcanoControllers = localproc.VolcanoControllers

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
type Process = localproc.Proc

// StartVolcanoControllers starts vc-controller-manager with VolcanoControllers, leader election off and
// its health endpoint on a free loopback port, and waits for /healthz.
func StartVolcanoControllers(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	health, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	return startComponent(ctx, o, localproc.VolcanoControllerManager(o.BinDir, o.Kubeconfig, health))
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
	ports, err := localproc.FreePorts(2)
	if err != nil {
		return nil, err
	}
	health, metrics := ports[0], ports[1]
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--leader-elect=false",
		"--scheduler-conf=" + conf,
		"--enable-healthz=true",
		"--healthz-address=" + localproc.Loopback(health),
		"--enable-metrics=true",
		"--listen-address=" + localproc.Loopback(metrics),
		"--schedule-period=500ms",
		"--cache-dumper=false",
	}
	return StartProcess(ctx, o, "vc-scheduler", args, httpOK("http://"+localproc.Loopback(health)+"/healthz"))
}

// StartKwok starts kwok (o.BinDir/kwok with kwok's default stages, kwok-stages.yaml beside it) managing
// the nodes annotated localproc.KwokNodeAnnotation=KwokNodeValue (KwokNode): it keeps them Ready, runs
// their pods (Running and Ready, as a kubelet reports them) and removes their deleted pods.
func StartKwok(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	port, err := localproc.FreePort()
	if err != nil {
		return nil, err
	}
	c := localproc.KwokComponent(o.BinDir, o.Kubeconfig, filepath.Join(o.LogDir, "kwok"), localproc.KwokStages(o.BinDir), localproc.Loopback(port))
	return startComponent(ctx, o, c)
}

// The annotation and value that put a node under StartKwok's kwok.
const (
	KwokNodeAnnotation = localproc.KwokNodeAnnotation
	KwokNodeValue      = localproc.KwokNodeValue
)

// StartJobSetController starts jobset-controller with a configuration file: leader election and the
// metrics endpoint off, its own cert rotation off, and its webhook server on a free loopback port with a
// self-signed certificate written under LogDir. It registers the controller's JobSet mutating and
// validating webhooks with the API server (named jobset-*-webhook-configuration-<port>, removed by
// Stop): the controller relies on its defaulting webhook — without it a JobSet's spec.network stays
// nil and the reconciler panics (dnsHostnamesEnabled, v0.10.1 and v0.11.0).
func StartJobSetController(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	certDir := filepath.Join(o.LogDir, "jobset-certs")
	ca, err := localproc.WriteSelfSignedCert(certDir)
	if err != nil {
		return nil, err
	}
	var webhook int
	p, err := retryPortClash(func() (*Process, error) {
		ports, err := localproc.FreePorts(2)
		if err != nil {
			return nil, err
		}
		var health int
		health, webhook = ports[0], ports[1]
		cfg := localproc.JobSetConfig(webhook, health, certDir)
		cfgPath := filepath.Join(o.LogDir, "jobset-config.yaml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", cfgPath, err)
		}
		c := localproc.JobSetController(o.BinDir, o.Kubeconfig, cfgPath, health, webhook)
		c.Args = append(c.Args, "--zap-log-level=info")
		return startComponent(ctx, o, c)
	})
	if err != nil {
		return nil, err
	}
	cleanup, err := registerJobSetWebhooks(ctx, o.Kubeconfig, localproc.Loopback(webhook), ca)
	if err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.OnStop(cleanup)
	return p, nil
}

// StartTrainerController starts Kubeflow Trainer's controller manager (trainer-controller-manager,
// github.com/kubeflow/trainer/v2 v2.3.0) as localproc.TrainerController runs it, the local cluster's
// way too: its configuration file and a TMPDIR of its own with a self-signed loopback certificate in
// LogDir, its probes, webhook server and status server on free loopback ports, certificate management
// off. No webhook configuration names Trainer's webhooks, so the apiserver never calls them and
// TrainJobs are admitted undefaulted and unvalidated.
func StartTrainerController(ctx context.Context, o NeighbourOptions) (*Process, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return retryPortClash(func() (*Process, error) {
		ports, err := localproc.FreePorts(3)
		if err != nil {
			return nil, err
		}
		c, err := localproc.TrainerController(o.BinDir, o.Kubeconfig, o.LogDir, localproc.TrainerPorts{Health: ports[0], Webhook: ports[1], Status: ports[2]})
		if err != nil {
			return nil, err
		}
		return startComponent(ctx, o, c)
	})
}

// retryPortClash runs start up to three times while it fails because a port FreePorts found free was
// taken before the process bound it ("address already in use": another process, or an outgoing
// connection's local port, took it in between); start picks new ports each time.
func retryPortClash(start func() (*Process, error)) (*Process, error) {
	var err error
	for range 3 {
		var p *Process
		if p, err = start(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
	}
	return nil, err
}

// registerJobSetWebhooks registers the JobSet webhooks (localproc.JobSetWebhookConfigs, named
// jobset-*-webhook-configuration-<addr>) in URL mode and returns their removal.
func registerJobSetWebhooks(ctx context.Context, kubeconfig, addr string, ca []byte) (func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	objs := localproc.JobSetWebhookConfigs(addr, ca, "-"+strings.ReplaceAll(addr, ":", "-"), nil)
	remove := func(ctx context.Context, objs []client.Object) {
		for _, o := range objs {
			_ = c.Delete(ctx, o)
		}
	}
	for i, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			remove(ctx, objs[:i])
			return nil, fmt.Errorf("registering JobSet's webhook configuration %s: %w", o.GetName(), err)
		}
	}
	return func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		remove(dctx, objs)
	}, nil
}

// JobSetConfig is the JobSet controller's configuration for a process outside a cluster
// (localproc.JobSetConfig).
func JobSetConfig(webhookPort, healthPort int, certDir string) string {
	return localproc.JobSetConfig(webhookPort, healthPort, certDir)
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
	if err := o.check(); err != nil {
		return nil, err
	}
	return startComponent(ctx, o, localproc.Component{Name: name, Binary: filepath.Join(o.BinDir, name), Args: args, Ready: ready})
}

// HTTPReady is a readiness check for StartProcess: url answers 200 (plain HTTP, or HTTPS without
// verifying the loopback certificate).
func HTTPReady(url string) func(context.Context) error { return httpOK(url) }

// HTTPReadyWith is HTTPReady with the given client (e.g. one that accepts a self-signed serving
// certificate on loopback).
func HTTPReadyWith(c *http.Client, url string) func(context.Context) error {
	return localproc.HTTPReady(c, url, "")
}

func httpOK(url string) func(context.Context) error {
	return localproc.HTTPReady(localproc.ProbeClient, url, "")
}

// FreePort is a free TCP port on 127.0.0.1.
func FreePort() (int, error) { return localproc.FreePort() }

// WriteSelfSignedCert writes tls.crt and tls.key for 127.0.0.1 into dir and returns the certificate PEM
// (localproc.WriteSelfSignedCert).
func WriteSelfSignedCert(dir string) ([]byte, error) { return localproc.WriteSelfSignedCert(dir) }

// startComponent starts c (o.ExtraArgs appended, o.StartTimeout) with its log in o.LogDir and waits
// until it serves; o must be checked.
func startComponent(ctx context.Context, o NeighbourOptions, c localproc.Component) (*Process, error) {
	c.Args = append(c.Args, o.ExtraArgs...)
	c.StartTimeout = o.StartTimeout
	return localproc.StartReady(ctx, c, localproc.StartOptions{LogPath: filepath.Join(o.LogDir, c.Name+".log")})
}

// TrainerModuleDir is the directory of the Kubeflow Trainer module hack/tools/trainer/go.mod pins, in
// the Go module cache (`go env GOMODCACHE`; hack/tools.sh and hack/crds.sh download it): its
// examples/ and manifests/ are what a new user applies.
func TrainerModuleDir() (string, error) {
	const mod = "github.com/kubeflow/trainer/v2"
	gomod := filepath.Join(RepoRoot(), "hack", "tools", "trainer", "go.mod")
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("reading Trainer's pin: %w", err)
	}
	var version string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == mod {
			version = f[1]
		}
	}
	if version == "" {
		return "", fmt.Errorf("%s does not require %s", gomod, mod)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), mod+"@"+version)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("the Trainer module %s is not in the module cache (run hack/tools.sh trainer-controller-manager or make crds): %w", version, err)
	}
	return dir, nil
}
