// Package karmadaplane starts a real Karmada control plane on loopback for tests: a named cluster of
// role karmada from test/util/localproc (localproc.UpKarmadaPlane: etcd, kube-apiserver as the
// "karmada-apiserver", karmada-aggregated-apiserver, karmada-webhook, kube-controller-manager,
// karmada-controller-manager, karmada-scheduler), the same bring-up `make run-multicluster` uses,
// with the processes as children of the test. It also joins member clusters in Push mode (Join).
// Every process logs to <Dir>/logs/<name>.log; certificates and the kubeconfig are written under Dir.
//
// Nothing here runs Volcano's controllers against the plane: the resource templates on the Karmada
// apiserver stay inert, only the members run them.
package karmadaplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// Namespaces and names Karmada's components expect (localproc's).
const (
	// SystemNamespace holds the plane's own objects (the aggregated apiserver's Service).
	SystemNamespace = localproc.KarmadaSystemNamespace
	// ClusterNamespace holds the members' credentials (the Secrets a Cluster's secretRef names).
	ClusterNamespace = localproc.KarmadaClusterNamespace
	// AggregatedAPIServerService is the Service the cluster.karmada.io APIService points at.
	AggregatedAPIServerService = localproc.KarmadaAggregatedAPIServerService
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are karmada-webhook's.
	MutatingWebhookConfiguration   = localproc.KarmadaMutatingWebhookConfiguration
	ValidatingWebhookConfiguration = localproc.KarmadaValidatingWebhookConfiguration
	// AdminUser is the admin client certificate's subject (in system:masters), used by every
	// Karmada component and by the tests.
	AdminUser = "hyperbatch-admin"
	// FrontProxyClientCN is the name kube-apiserver's aggregator presents to the aggregated apiserver.
	FrontProxyClientCN = localproc.FrontProxyClientCN
	// KarmadaModule is the module the plane's binaries and CRDs come from.
	KarmadaModule = localproc.KarmadaModule
	// ClusterName is the plane's name as a localproc cluster (its processes are karmada/<component>).
	ClusterName = "karmada"
)

// Tools are the binaries a plane runs, all in Options.BinDir.
var Tools = localproc.KarmadaTools

// KarmadaVersion is the Karmada version hack/tools/karmada/go.mod pins.
func KarmadaVersion() (string, error) { return localproc.KarmadaVersion(framework.RepoRoot()) }

// KarmadaModuleDir is the pinned Karmada module's directory in the Go module cache.
func KarmadaModuleDir() (string, error) { return localproc.KarmadaModuleDir(framework.RepoRoot()) }

// Options say where and how a plane runs.
type Options struct {
	// Dir receives logs/, pki/, etcd/ and the kubeconfig (required, fresh: t.TempDir() is fine).
	Dir string
	// BinDir holds the binaries (Tools); default framework.AssetsDir() (the project's bin/).
	BinDir string
	// TemplateCRDDirs are the CRDs of the kinds propagated through the plane (the resource
	// templates); default Volcano's (_output/crds/volcano, `make crds`).
	TemplateCRDDirs []string
	// StartTimeout, when set, bounds each process's wait until it serves instead of its own default.
	StartTimeout time.Duration
	// ControllerManagerArgs are appended to karmada-controller-manager's command line (e.g.
	// --feature-gates=...).
	ControllerManagerArgs []string
}

// Step is one step of Start and the time it took.
type Step = localproc.Step

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
	// Cluster is the plane as a localproc cluster (ports, PKI, log files).
	Cluster localproc.Cluster

	procs *localproc.Procs
	bin   string
}

// Start brings the plane up and returns once every component serves: the cluster.karmada.io
// APIService is Available, karmada-webhook answers over TLS with the CA in its webhook
// configurations and the Karmada controllers report healthy. On error everything started is
// stopped again.
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
	if _, err := os.Stat(filepath.Join(o.Dir, "etcd")); err == nil {
		return nil, fmt.Errorf("karmadaplane: %s already holds a plane's etcd data; give Start a fresh directory", o.Dir)
	}
	moduleDir, err := KarmadaModuleDir()
	if err != nil {
		return nil, err
	}
	base, err := localproc.FreePortBlock(localproc.PortCount)
	if err != nil {
		return nil, err
	}
	p = &Plane{Dir: o.Dir, procs: &localproc.Procs{StartTimeout: o.StartTimeout}, bin: o.BinDir,
		Cluster: localproc.Cluster{Name: ClusterName, Dir: o.Dir, PortBase: base, Role: localproc.RoleKarmada}}
	p.Kubeconfig = p.Cluster.Kubeconfig()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, p.LogTails(15))
			_ = p.Stop()
			p = nil
		}
	}()
	if err := localproc.PrepareCluster(o.Dir, p.Cluster); err != nil {
		return p, err
	}
	p.Ready, err = localproc.UpKarmadaPlane(ctx, p.Cluster, o.BinDir, localproc.KarmadaOptions{
		ModuleDir: moduleDir, TemplateCRDDirs: o.TemplateCRDDirs, ControllerManagerArgs: o.ControllerManagerArgs,
	}, p.procs.Start)
	p.Processes = p.procs.List
	if err != nil {
		return p, err
	}
	if p.Config, err = clientcmd.BuildConfigFromFlags("", p.Kubeconfig); err != nil {
		return p, fmt.Errorf("loading %s: %w", p.Kubeconfig, err)
	}
	p.Config.QPS, p.Config.Burst = 100, 200
	if p.Client, err = client.New(p.Config, client.Options{Scheme: Scheme()}); err != nil {
		return p, fmt.Errorf("client for the Karmada apiserver: %w", err)
	}
	p.StartupTime = time.Since(begin)
	return p, nil
}

// Join registers a member cluster with the plane in Push mode (localproc.JoinMember).
func (p *Plane) Join(ctx context.Context, name string, member *rest.Config) error {
	return localproc.JoinMember(ctx, p.Client, name, member)
}

// WaitClusterReady waits until Cluster name reports Ready=True and returns it.
func (p *Plane) WaitClusterReady(ctx context.Context, name string, timeout time.Duration) (*clusterv1alpha1.Cluster, error) {
	return localproc.WaitClusterReady(ctx, p.Client, name, timeout)
}

// Stop stops every process in reverse start order. Safe to call twice.
func (p *Plane) Stop() error {
	if p == nil || p.procs == nil {
		return nil
	}
	return p.procs.StopAll()
}

// Process returns the running process of that component name (nil when it was not started).
func (p *Plane) Process(name string) *framework.Process {
	for _, proc := range p.Processes {
		if proc.Name == name {
			return proc
		}
	}
	return nil
}

// Crashed names the processes that have exited.
func (p *Plane) Crashed() []string { return p.procs.Crashed() }

// LogTails is the last n lines of every process's log.
func (p *Plane) LogTails(n int) string {
	if p == nil || p.procs == nil {
		return ""
	}
	return p.procs.LogTails(n)
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
