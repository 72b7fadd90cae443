// Package karmadaplane starts a real Karmada control plane on loopback from binaries in the project's
// bin/ (hack/tools.sh): etcd, kube-apiserver (the "karmada-apiserver": a plain kube-apiserver with the
// aggregation flags and Karmada's CRDs), karmada-aggregated-apiserver (it serves the Cluster kind,
// which is not a CRD), karmada-webhook, kube-controller-manager (namespace and garbage-collector
// controllers), karmada-controller-manager and karmada-scheduler. It also joins member clusters in
// Push mode (Join). Every process logs to <Dir>/logs/<name>.log; certificates and kubeconfigs are
// written under Dir.
//
// Nothing here runs Volcano's controllers against the plane: the resource templates on the Karmada
// apiserver stay inert, only the members run them.
package karmadaplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Namespaces and names Karmada's components expect (pkg/util/names in Karmada).
const (
	// SystemNamespace holds the plane's own objects (leader-election leases, the aggregated apiserver's
	// Service).
	SystemNamespace = "karmada-system"
	// ClusterNamespace holds the members' credentials (the Secrets a Cluster's secretRef names).
	ClusterNamespace = "karmada-cluster"
	// AggregatedAPIServerService is the Service the cluster.karmada.io APIService points at.
	AggregatedAPIServerService = "karmada-aggregated-apiserver"
)

// Tools are the binaries a plane runs, all in Options.BinDir.
var Tools = []string{"etcd", "kube-apiserver", "kube-controller-manager",
	"karmada-aggregated-apiserver", "karmada-webhook", "karmada-controller-manager", "karmada-scheduler"}

// Options say where and how a plane runs.
type Options struct {
	// Dir receives logs/, pki/, etcd/ and the kubeconfig (required, fresh: t.TempDir() is fine).
	Dir string
	// BinDir holds the binaries (Tools); default framework.AssetsDir() (the project's bin/).
	BinDir string
	// TemplateCRDDirs are the CRDs of the kinds propagated through the plane (the resource
	// templates); default Volcano's (_output/crds/volcano, `make crds`).
	TemplateCRDDirs []string
	// StartTimeout bounds each process's wait until it serves; default 120s.
	StartTimeout time.Duration
	// ControllerManagerArgs are appended to karmada-controller-manager's command line (e.g.
	// --feature-gates=...).
	ControllerManagerArgs []string
}

// Plane is a running Karmada control plane.
type Plane struct {
	Dir string
	// Kubeconfig is the admin kubeconfig of the Karmada apiserver (client certificate in
	// system:masters).
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	// Processes in start order.
	Processes []*framework.Process
	// Ready is how long each step of Start took until it was ready, in order.
	Ready []Step
	// StartupTime is the wall time Start took.
	StartupTime time.Duration

	pki    *pki
	binDir string
}

// Step is one step of Start and the time it took.
type Step struct {
	Name string
	Took time.Duration
}

// Start brings the plane up and returns once every component serves: the cluster.karmada.io
// APIService is Available, karmada-webhook answers over TLS with the CA in its webhook
// configurations, the garbage collector deleted a probe dependent and the Karmada controllers
// report healthy. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (p *Plane, err error) {
	begin := time.Now()
	if o.Dir == "" {
		return nil, errors.New("karmadaplane: Options.Dir is required")
	}
	if o.BinDir == "" {
		o.BinDir = framework.AssetsDir()
	}
	if o.TemplateCRDDirs == nil {
		o.TemplateCRDDirs = []string{filepath.Join(framework.RepoRoot(), "_output", "crds", "volcano")}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 120 * time.Second
	}
	var missing []string
	for _, t := range Tools {
		if _, err := os.Stat(filepath.Join(o.BinDir, t)); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("karmadaplane: %s missing from %s: run 'hack/tools.sh %s'", strings.Join(missing, ", "), o.BinDir, strings.Join(missing, " "))
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "etcd")); err == nil {
		return nil, fmt.Errorf("karmadaplane: %s already holds a plane's etcd data; give Start a fresh directory", o.Dir)
	}
	moduleDir, err := KarmadaModuleDir()
	if err != nil {
		return nil, err
	}
	p = &Plane{Dir: o.Dir, Kubeconfig: filepath.Join(o.Dir, "karmada.kubeconfig"), binDir: o.BinDir}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, p.LogTails(15))
			_ = p.Stop()
			p = nil
		}
	}()
	if p.pki, err = newPKI(filepath.Join(o.Dir, "pki")); err != nil {
		return p, err
	}
	ports, err := freePorts(9)
	if err != nil {
		return p, err
	}
	etcdClient, etcdPeer, apiPort, aggPort, hookPort, hookHealth, kcmPort, cmHealth, schedHealth :=
		ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6], ports[7], ports[8]
	logs := filepath.Join(o.Dir, "logs")
	nopts := func(extra ...string) framework.NeighbourOptions {
		return framework.NeighbourOptions{Kubeconfig: p.Kubeconfig, LogDir: logs, BinDir: o.BinDir, StartTimeout: o.StartTimeout, ExtraArgs: extra}
	}
	step := time.Now()
	mark := func(name string) {
		p.Ready = append(p.Ready, Step{Name: name, Took: time.Since(step)})
		step = time.Now()
	}
	startProc := func(name string, args []string, ready func(context.Context) error, extra ...string) error {
		proc, err := framework.StartProcess(ctx, nopts(extra...), name, args, ready)
		if err != nil {
			return err
		}
		p.Processes = append(p.Processes, proc)
		mark(name)
		return nil
	}

	// etcd, shared by kube-apiserver and karmada-aggregated-apiserver (as in Karmada's deployment).
	etcdURL := "http://" + loopback(etcdClient)
	if err := startProc("etcd", []string{
		"--name=karmada-etcd", "--data-dir=" + filepath.Join(o.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=http://" + loopback(etcdPeer), "--initial-advertise-peer-urls=http://" + loopback(etcdPeer),
		"--initial-cluster=karmada-etcd=http://" + loopback(etcdPeer), "--initial-cluster-state=new",
		"--unsafe-no-fsync=true", "--log-level=warn",
	}, framework.HTTPReady(etcdURL+"/health")); err != nil {
		return p, err
	}

	// karmada-apiserver: kube-apiserver with the aggregation (request-header) flags.
	k := p.pki
	apiURL := "https://" + loopback(apiPort)
	if err := startProc("kube-apiserver", []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + k.ServingCert, "--tls-private-key-file=" + k.ServingKey,
		"--client-ca-file=" + k.CAFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + k.ServiceAccountPub, "--service-account-signing-key-file=" + k.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--allow-privileged=true",
		// As Karmada's own deployment: no pods run on this apiserver.
		"--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount",
		"--requestheader-client-ca-file=" + k.FrontProxyCAFile,
		"--requestheader-allowed-names=" + FrontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + k.FrontProxyCert, "--proxy-client-key-file=" + k.FrontProxyKey,
		// The "kubernetes" Endpoints may not hold a loopback address, and nothing reaches this apiserver
		// through a Service.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}, tlsReady(k.caPEM, apiURL+"/readyz")); err != nil {
		return p, err
	}
	p.Config = &rest.Config{Host: apiURL, QPS: 100, Burst: 200, TLSClientConfig: rest.TLSClientConfig{
		CAData: k.caPEM, CertData: k.adminCertPEM, KeyData: k.adminKeyPEM}}
	if err := writeKubeconfig(p.Config, "karmada-apiserver", p.Kubeconfig); err != nil {
		return p, err
	}
	if p.Client, err = client.New(p.Config, client.Options{Scheme: Scheme()}); err != nil {
		return p, fmt.Errorf("client for the Karmada apiserver: %w", err)
	}
	for _, ns := range []string{SystemNamespace, ClusterNamespace} {
		if err := p.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return p, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	hookURL := "https://" + loopback(hookPort)
	crds, err := karmadaCRDs(moduleDir, hookURL, k.caPEM)
	if err != nil {
		return p, err
	}
	if err := installCRDs(p.Config, crds, o.TemplateCRDDirs); err != nil {
		return p, err
	}
	mark("crds")

	// karmada-aggregated-apiserver serves cluster.karmada.io (Cluster, and its proxy) from the same
	// etcd; kube-aggregator reaches it through an ExternalName Service to localhost and checks its
	// certificate for <service>.<namespace>.svc.
	aggURL := "https://" + loopback(aggPort)
	if err := startProc("karmada-aggregated-apiserver", []string{
		"--kubeconfig=" + p.Kubeconfig,
		"--authentication-kubeconfig=" + p.Kubeconfig, "--authorization-kubeconfig=" + p.Kubeconfig,
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(aggPort),
		"--tls-cert-file=" + k.AggregatedCert, "--tls-private-key-file=" + k.AggregatedKey,
		"--audit-log-path=-", "--audit-log-maxage=0", "--audit-log-maxbackup=0",
	}, tlsReady(k.caPEM, aggURL+"/readyz")); err != nil {
		return p, err
	}
	if err := p.registerAggregatedAPI(ctx, aggPort); err != nil {
		return p, err
	}
	mark("apiservice cluster.karmada.io available")

	// karmada-webhook; its configurations are registered in URL mode with the plane's CA.
	if err := startProc("karmada-webhook", []string{
		"--kubeconfig=" + p.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(hookPort),
		"--cert-dir=" + k.WebhookCertDir,
		"--health-probe-bind-address=" + loopback(hookHealth),
		"--metrics-bind-address=0",
	}, tlsReady(k.caPEM, hookURL+"/readyz/")); err != nil {
		return p, err
	}
	if err := registerWebhooks(ctx, p.Client, hookURL, k.caPEM); err != nil {
		return p, err
	}

	// kube-controller-manager: namespace deletion and garbage collection (owner references Karmada
	// writes, foreground deletion).
	if err := startProc("kube-controller-manager", []string{
		"--kubeconfig=" + p.Kubeconfig,
		"--authentication-kubeconfig=" + p.Kubeconfig, "--authorization-kubeconfig=" + p.Kubeconfig,
		"--controllers=namespace-controller,garbage-collector-controller",
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--cert-dir=" + filepath.Join(o.Dir, "pki", "kube-controller-manager"),
		"--root-ca-file=" + k.CAFile,
		"--service-account-private-key-file=" + k.ServiceAccountKey,
		"--profiling=false",
	}, framework.HTTPReady("https://"+loopback(kcmPort)+"/healthz")); err != nil {
		return p, err
	}

	if err := startProc("karmada-controller-manager", []string{
		"--kubeconfig=" + p.Kubeconfig,
		"--leader-elect=false",
		"--cluster-status-update-frequency=10s",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=" + loopback(cmHealth),
	}, framework.HTTPReady("http://"+loopback(cmHealth)+"/healthz"), o.ControllerManagerArgs...); err != nil {
		return p, err
	}
	if err := startProc("karmada-scheduler", []string{
		"--kubeconfig=" + p.Kubeconfig,
		"--leader-elect=false",
		"--enable-scheduler-estimator=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=" + loopback(schedHealth),
	}, framework.HTTPReady("http://"+loopback(schedHealth)+"/healthz")); err != nil {
		return p, err
	}
	p.StartupTime = time.Since(begin)
	return p, nil
}

// registerAggregatedAPI creates the ExternalName Service and the APIService of cluster.karmada.io
// and waits until kube-aggregator reports it Available (it reached the aggregated apiserver and
// trusted its certificate).
func (p *Plane) registerAggregatedAPI(ctx context.Context, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: AggregatedAPIServerService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if err := p.Client.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", SystemNamespace, AggregatedAPIServerService, err)
	}
	name := clusterv1alpha1.SchemeGroupVersion.Version + "." + clusterv1alpha1.GroupName
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"service": map[string]any{"namespace": SystemNamespace, "name": AggregatedAPIServerService, "port": int64(port)},
			"group":   clusterv1alpha1.GroupName, "version": clusterv1alpha1.SchemeGroupVersion.Version,
			"caBundle": base64.StdEncoding.EncodeToString(p.pki.caPEM), "groupPriorityMinimum": int64(2000), "versionPriority": int64(10),
		},
	}}
	if err := p.Client.Create(ctx, apiService); err != nil {
		return fmt.Errorf("creating APIService %s: %w", name, err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.Client.Get(ctx, client.ObjectKeyFromObject(apiService), apiService); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
		}
		conds, _, _ := unstructured.NestedSlice(apiService.Object, "status", "conditions")
		for _, raw := range conds {
			c, _ := raw.(map[string]any)
			if c["type"] != "Available" {
				continue
			}
			last = fmt.Sprintf("Available=%v %v: %v", c["status"], c["reason"], c["message"])
			if c["status"] != "True" {
				return false, nil
			}
			// The kind must be listable through the aggregator too.
			if err := p.Client.List(ctx, &clusterv1alpha1.ClusterList{}); err != nil {
				last = "listing Clusters: " + err.Error()
				return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s did not become Available within 90s (last: %s): %w", name, last, err)
	}
	return nil
}

// Stop stops every process in reverse start order. Safe to call twice.
func (p *Plane) Stop() error {
	if p == nil {
		return nil
	}
	var errs []error
	for i := len(p.Processes) - 1; i >= 0; i-- {
		errs = append(errs, p.Processes[i].Stop())
	}
	return errors.Join(errs...)
}

// Process returns the running process of that name (nil when it was not started).
func (p *Plane) Process(name string) *framework.Process {
	for _, proc := range p.Processes {
		if proc.Name == name {
			return proc
		}
	}
	return nil
}

// Crashed names the processes that have exited.
func (p *Plane) Crashed() []string {
	var out []string
	for _, proc := range p.Processes {
		if proc.Exited() {
			out = append(out, proc.Name)
		}
	}
	return out
}

// LogTails is the last n lines of every process's log.
func (p *Plane) LogTails(n int) string {
	var b strings.Builder
	for _, proc := range p.Processes {
		b.WriteString(proc.LogTail(n))
		b.WriteString("\n")
	}
	return b.String()
}

// Scheme is what the plane's client reads and writes: hyperbatch's scheme (Volcano, Karmada policies,
// JobSet, core) plus Karmada's Cluster, Work and ResourceBinding kinds.
func Scheme() *runtime.Scheme {
	s := scheme.New()
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1alpha1.Install, workv1alpha1.Install, workv1alpha2.Install,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// writeKubeconfig writes cfg (client certificate or bearer token) as a kubeconfig with one context.
func writeKubeconfig(cfg *rest.Config, name, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// tlsReady is a readiness check: url answers 200 over TLS verified with caPEM.
func tlsReady(caPEM []byte, url string) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return framework.HTTPReadyWith(c, url)
}

func freePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	seen := map[int]bool{}
	for len(out) < n {
		port, err := framework.FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[port] {
			seen[port] = true
			out = append(out, port)
		}
	}
	return out, nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
