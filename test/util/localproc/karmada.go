package localproc

import (
	"context"
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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespaces and names Karmada's components expect (pkg/util/names in Karmada).
const (
	// KarmadaSystemNamespace holds the plane's own objects (the aggregated apiserver's Service).
	KarmadaSystemNamespace = "karmada-system"
	// KarmadaClusterNamespace holds the members' credentials (the Secrets a Cluster's secretRef names).
	KarmadaClusterNamespace = "karmada-cluster"
	// KarmadaAggregatedAPIServerService is the Service the cluster.karmada.io APIService points at.
	KarmadaAggregatedAPIServerService = "karmada-aggregated-apiserver"
)

// KarmadaTools are the binaries a Karmada plane runs (hack/tools.sh builds them into bin/).
var KarmadaTools = []string{"etcd", "kube-apiserver", "kube-controller-manager",
	"karmada-aggregated-apiserver", "karmada-webhook", "karmada-controller-manager", "karmada-scheduler"}

// KarmadaControllerManagerScaleArgs size karmada-controller-manager for a plane that propagates
// thousands of resource templates at once (a HyperJob of 1,000 children; bench/multicluster). Karmada
// documents the direction, not the numbers:
//   - --kube-api-qps/--kube-api-burst (default 40/60): since v1.14 one token bucket limits every
//     controller's requests to the Karmada apiserver together, and "access may be restricted in
//     large-scale environments ... adjust upward the rate limit parameters 'kube-api-qps' and
//     'kube-api-burst' for each component" (docs/CHANGELOG/CHANGELOG-1.14.md, karmada#6095);
//   - --cluster-api-qps/--cluster-api-burst (default 40/60): the same for the requests to the members
//     (CHANGELOG-1.14.md, karmada#6192);
//   - --concurrent-resource-template-syncs, --concurrent-resourcebinding-syncs and
//     --concurrent-work-syncs (default 5 each), --concurrent-propagation-policy-syncs (default 1): the
//     workers of the detector, the binding controller, and the execution and work-status controllers;
//     Karmada's answer to slow propagation of 1,000+ templates is to raise them (karmada#3108).
//
// The values are ours: high enough that the client-side limit is never what a child waits on (the
// benchmark reports the controller-manager's rest_client_rate_limiter_duration_seconds), so the
// apiserver's own priority and fairness decides.
var KarmadaControllerManagerScaleArgs = []string{
	"--kube-api-qps=500", "--kube-api-burst=1000",
	"--cluster-api-qps=200", "--cluster-api-burst=400",
	"--concurrent-resource-template-syncs=20",
	"--concurrent-resourcebinding-syncs=20",
	"--concurrent-work-syncs=20",
	"--concurrent-propagation-policy-syncs=5",
}

// KarmadaSchedulerScaleArgs raise karmada-scheduler's client limit to the Karmada apiserver (default
// 40/60) for the same reason (CHANGELOG-1.14.md, karmada#6095).
var KarmadaSchedulerScaleArgs = []string{"--kube-api-qps=200", "--kube-api-burst=400"}

// KarmadaSchedulerRetryArgs bound how long karmada-scheduler waits before it tries a binding that
// failed to schedule again. Its queue (PriorityBasedScheduling off, the default) retries with
// exponential backoff from --rate-limiter-base-delay 5ms to --rate-limiter-max-delay (default 1000s),
// so a binding that failed for a minute is next tried minutes after room appears in a member; a
// HyperJob held for all-or-nothing waits that long. 10s is the same order as the members' status
// refresh (--cluster-status-update-frequency, 10s), the other delay before room is seen.
var KarmadaSchedulerRetryArgs = []string{"--rate-limiter-max-delay=10s"}

// karmadaPlaneControllers are the kube-controller-manager controllers a Karmada plane needs:
// namespace deletion and garbage collection (the owner references Karmada and hyperbatch write).
var karmadaPlaneControllers = []string{"namespace-controller", "garbage-collector-controller"}

// Starter starts one stage of a cluster's components and returns once each is ready: a Session's
// (StageStarter) for `make run`, a Procs' for tests.
type Starter func(ctx context.Context, c Cluster, stage Stage) error

// Step is one step of a bring-up and how long it took.
type Step struct {
	Name string
	Took time.Duration
}

// steps times a bring-up's steps.
type steps struct {
	list []Step
	last time.Time
}

func (s *steps) mark(name string) {
	s.list = append(s.list, Step{Name: name, Took: time.Since(s.last)})
	s.last = time.Now()
}

// KarmadaOptions say what a Karmada plane serves besides Karmada's own kinds.
type KarmadaOptions struct {
	// ModuleDir is the pinned Karmada module's directory (KarmadaModuleDir): its CRDs are installed.
	ModuleDir string
	// TemplateCRDDirs are the CRDs of the kinds propagated through the plane (Volcano's) and of
	// hyperbatch's control-plane kinds (HyperJob, WorkloadPolicy).
	TemplateCRDDirs []string
	// ControllerManagerArgs are appended to karmada-controller-manager's command line.
	ControllerManagerArgs []string
}

// KarmadaClient is a client of a plane's Karmada apiserver with the admin credentials; it reads and
// writes core kinds, webhook configurations and Karmada's Cluster.
func KarmadaClient(c Cluster) (client.Client, *rest.Config, error) {
	return ClusterClient(c, clusterv1alpha1.Install)
}

// ClusterClient is an admin client of cluster c from its kubeconfig, for client-go's kinds and those
// kinds adds.
func ClusterClient(c Cluster, adds ...func(*runtime.Scheme) error) (client.Client, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	for _, add := range adds {
		utilruntime.Must(add(s))
	}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, nil, fmt.Errorf("client for cluster %s: %w", c.Name, err)
	}
	return cl, cfg, nil
}

// UpKarmadaPlane brings up a Karmada control plane in cluster c (role RoleKarmada; its PKI and
// kubeconfig must exist) and returns once every component serves: etcd and kube-apiserver as the
// Karmada apiserver; Karmada's CRDs (binding conversion pointed at karmada-webhook) and the template
// CRDs; karmada-aggregated-apiserver behind an ExternalName Service and the APIService
// v1alpha1.cluster.karmada.io (Available, Clusters listable); karmada-webhook and its configurations;
// kube-controller-manager (namespace, garbage collector), karmada-controller-manager and
// karmada-scheduler. It returns the time of each step.
func UpKarmadaPlane(ctx context.Context, c Cluster, bin string, o KarmadaOptions, start Starter) ([]Step, error) {
	if c.Role != RoleKarmada {
		return nil, fmt.Errorf("cluster %s has role %q, not %q", c.Name, c.Role, RoleKarmada)
	}
	if o.ModuleDir == "" {
		return nil, errors.New("KarmadaOptions.ModuleDir is required (KarmadaModuleDir)")
	}
	var missing []string
	for _, t := range KarmadaTools {
		if _, err := os.Stat(filepath.Join(bin, t)); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s missing from %s: run 'hack/tools.sh %s'", strings.Join(missing, ", "), bin, strings.Join(missing, " "))
	}
	st := &steps{last: time.Now()}
	p, pt := c.PKI(), c.Ports()
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.CACert, err)
	}
	tlsClient, err := p.TLSClient()
	if err != nil {
		return nil, err
	}
	if err := start(ctx, c, Stage{Etcd(c, bin)}); err != nil {
		return st.list, err
	}
	st.mark("etcd")
	// As Karmada's own deployment (artifacts/deploy/karmada-apiserver.yaml): no pods run on this
	// apiserver.
	apiserver, err := KubeAPIServer(c, bin, "--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount")
	if err != nil {
		return st.list, err
	}
	if err := start(ctx, c, Stage{apiserver}); err != nil {
		return st.list, err
	}
	st.mark("kube-apiserver")
	kc, cfg, err := KarmadaClient(c)
	if err != nil {
		return st.list, err
	}
	for _, ns := range []string{KarmadaSystemNamespace, KarmadaClusterNamespace} {
		if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return st.list, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	hookURL := "https://" + Loopback(pt.KarmadaWebhook)
	crds, err := karmadaCRDs(o.ModuleDir, hookURL, ca)
	if err != nil {
		return st.list, err
	}
	if err := installKarmadaCRDs(cfg, crds, o.TemplateCRDDirs); err != nil {
		return st.list, err
	}
	st.mark("crds")

	// karmada-aggregated-apiserver serves cluster.karmada.io (Cluster, and its proxy) from the same
	// etcd; kube-aggregator reaches it through an ExternalName Service to localhost and checks its
	// certificate for <service>.<namespace>.svc (the serving certificate has that name).
	kubeconfig := c.Kubeconfig()
	agg := Component{
		Name: "karmada-aggregated-apiserver", Binary: filepath.Join(bin, "karmada-aggregated-apiserver"), StartTimeout: 120 * time.Second,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--etcd-servers=http://" + Loopback(pt.EtcdClient),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(pt.KarmadaAggregated),
			"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
			"--audit-log-path=-", "--audit-log-maxage=0", "--audit-log-maxbackup=0",
		},
		Ready: HTTPReady(tlsClient, "https://"+Loopback(pt.KarmadaAggregated)+"/readyz", ""),
	}
	// karmada-webhook serves with its own certificate from the cluster's CA.
	hook := Component{
		Name: "karmada-webhook", Binary: filepath.Join(bin, "karmada-webhook"), StartTimeout: 120 * time.Second,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(pt.KarmadaWebhook),
			"--cert-dir=" + p.KarmadaWebhookCertDir,
			"--health-probe-bind-address=" + Loopback(pt.KarmadaWebhookHealth),
			"--metrics-bind-address=0",
		},
		Ready: TLSAnswersCA(ca, hookURL+"/readyz/"),
	}
	if err := start(ctx, c, Stage{agg, hook}); err != nil {
		return st.list, err
	}
	if err := registerAggregatedAPI(ctx, kc, pt.KarmadaAggregated, ca); err != nil {
		return st.list, err
	}
	if err := registerKarmadaWebhooks(ctx, kc, hookURL, ca); err != nil {
		return st.list, err
	}
	st.mark("aggregated apiserver (APIService Available) and karmada-webhook")

	kcm, err := KubeControllerManager(c, bin, karmadaPlaneControllers)
	if err != nil {
		return st.list, err
	}
	cm := Component{
		Name: "karmada-controller-manager", Binary: filepath.Join(bin, "karmada-controller-manager"), StartTimeout: 120 * time.Second,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--cluster-status-update-frequency=10s",
			"--metrics-bind-address=" + Loopback(pt.KarmadaControllerMetrics),
			"--health-probe-bind-address=" + Loopback(pt.KarmadaControllerHealth),
		}, append(append([]string{}, KarmadaControllerManagerScaleArgs...), o.ControllerManagerArgs...)...),
		Ready: HTTPReady(http.DefaultClient, "http://"+Loopback(pt.KarmadaControllerHealth)+"/healthz", ""),
	}
	sched := Component{
		Name: "karmada-scheduler", Binary: filepath.Join(bin, "karmada-scheduler"), StartTimeout: 120 * time.Second,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--enable-scheduler-estimator=false",
			"--metrics-bind-address=" + Loopback(pt.KarmadaSchedulerMetrics),
			"--health-probe-bind-address=" + Loopback(pt.KarmadaSchedulerHealth),
		}, append(append([]string{}, KarmadaSchedulerScaleArgs...), KarmadaSchedulerRetryArgs...)...),
		Ready: HTTPReady(http.DefaultClient, "http://"+Loopback(pt.KarmadaSchedulerHealth)+"/healthz", ""),
	}
	if err := start(ctx, c, Stage{kcm, cm, sched}); err != nil {
		return st.list, err
	}
	st.mark("kube-controller-manager, karmada-controller-manager, karmada-scheduler")
	return st.list, nil
}

// registerAggregatedAPI creates the ExternalName Service and the APIService of cluster.karmada.io
// and waits until kube-aggregator reports it Available (it reached the aggregated apiserver and
// trusted its certificate) and Clusters can be listed through it.
func registerAggregatedAPI(ctx context.Context, c client.Client, port int, ca []byte) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: KarmadaSystemNamespace, Name: KarmadaAggregatedAPIServerService},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", KarmadaSystemNamespace, KarmadaAggregatedAPIServerService, err)
	}
	name := clusterv1alpha1.SchemeGroupVersion.Version + "." + clusterv1alpha1.GroupName
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"service": map[string]any{"namespace": KarmadaSystemNamespace, "name": KarmadaAggregatedAPIServerService, "port": int64(port)},
			"group":   clusterv1alpha1.GroupName, "version": clusterv1alpha1.SchemeGroupVersion.Version,
			"caBundle": base64.StdEncoding.EncodeToString(ca), "groupPriorityMinimum": int64(2000), "versionPriority": int64(10),
		},
	}}
	if err := c.Create(ctx, apiService); err != nil {
		return fmt.Errorf("creating APIService %s: %w", name, err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(apiService), apiService); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
		}
		conds, _, _ := unstructured.NestedSlice(apiService.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] != "Available" {
				continue
			}
			last = fmt.Sprintf("Available=%v %v: %v", cond["status"], cond["reason"], cond["message"])
			if cond["status"] != "True" {
				return false, nil
			}
			// The kind must be listable through the aggregator too.
			if err := c.List(ctx, &clusterv1alpha1.ClusterList{}); err != nil {
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

// Procs starts a cluster's stages as children of the calling process (tests): each in its own process
// group, logs in the cluster's logs/, no PID files. List holds them in start order.
type Procs struct {
	List []*Proc
	// StartTimeout, when set, replaces each component's own StartTimeout.
	StartTimeout time.Duration
}

// Start is a Starter.
func (ps *Procs) Start(ctx context.Context, c Cluster, stage Stage) error {
	var started []*Proc
	for _, comp := range stage {
		if ps.StartTimeout > 0 {
			comp.StartTimeout = ps.StartTimeout
		}
		p, err := Start(comp, StartOptions{Process: c.Process(comp.Name), LogPath: c.LogFile(comp.Name)})
		if err != nil {
			return err
		}
		ps.List = append(ps.List, p)
		started = append(started, p)
	}
	for _, p := range started {
		if err := p.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// StopAll stops every process, last first. Safe to call twice.
func (ps *Procs) StopAll() error {
	var errs []error
	for i := len(ps.List) - 1; i >= 0; i-- {
		errs = append(errs, ps.List[i].Stop())
	}
	return errors.Join(errs...)
}

// Find is the process of that component (nil when none was started).
func (ps *Procs) Find(component string) *Proc {
	for _, p := range ps.List {
		if p.Name == component {
			return p
		}
	}
	return nil
}

// Restart starts component again with its command line (after it was stopped or crashed; a
// running one is stopped first) and waits until it is ready; it keeps its place in List.
func (ps *Procs) Restart(ctx context.Context, c Cluster, component string) error {
	for i, p := range ps.List {
		if p.Name != component {
			continue
		}
		if err := p.Stop(); err != nil {
			return err
		}
		np, err := StartReady(ctx, p.Component, StartOptions{Process: p.Process, LogPath: c.LogFile(component + "-restarted")})
		if err != nil {
			return err
		}
		ps.List[i] = np
		return nil
	}
	return fmt.Errorf("cluster %s has no process %s to restart", c.Name, component)
}

// Crashed names the components that have exited.
func (ps *Procs) Crashed() []string {
	var out []string
	for _, p := range ps.List {
		if p.Exited() {
			out = append(out, p.Name)
		}
	}
	return out
}

// LogTails is the last n lines of every process's log.
func (ps *Procs) LogTails(n int) string {
	var b strings.Builder
	for _, p := range ps.List {
		b.WriteString(p.LogTail(n))
		b.WriteString("\n")
	}
	return b.String()
}

// PrepareCluster readies a fresh cluster c of the state in dir for a bring-up: its directories,
// its PKI and its kubeconfig (c.Kubeconfig(); dir's with every context when c.Dir is dir).
func PrepareCluster(dir string, cs ...Cluster) error {
	for _, c := range cs {
		if err := c.PrepareDirs(); err != nil {
			return err
		}
		if err := c.PKI().Generate(); err != nil {
			return fmt.Errorf("generating certificates of cluster %s: %w", c.Name, err)
		}
	}
	return WriteKubeconfigs(dir, cs)
}

// StageStarter is the session's Starter (`make run`: PID files, state file, own sessions).
func (s *Session) StageStarter() Starter {
	return func(ctx context.Context, c Cluster, stage Stage) error { return s.Start(ctx, c.Name, stage...) }
}
