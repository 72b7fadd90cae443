// Package membercluster starts a member cluster for multi-cluster tests on loopback: etcd and
// kube-apiserver (test/integration/framework's envtest start) with hyperbatch's and Volcano's CRDs,
// kwok with fake nodes that carry nvidia.com/gpu, and Volcano's webhook-manager, controller-manager
// and scheduler, so a Volcano Job a Karmada plane propagates here is admitted, scheduled, run and
// completed by Volcano's own components (kwok plays the kubelets). Every process logs to
// <Dir>/logs/<name>.log.
package membercluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// GPUResource is the accelerator the fake nodes advertise.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Kwok's markers: it manages the nodes with KwokNodeAnnotation=fake; KwokNodeLabel=kwok selects them.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeLabel      = "type"
	kwokNodeValue      = "fake"
	kwokNodeLabelValue = "kwok"
)

// Tools are the binaries a member runs (besides etcd and kube-apiserver, which envtest starts).
var Tools = []string{"etcd", "kube-apiserver", "kwok", "vc-webhook-manager", "vc-controller-manager", "vc-scheduler"}

// volcanoAdmissions are the webhook-manager services a member registers: Jobs (defaulting and
// validation), PodGroups and Queues, as Volcano's Helm chart does for these kinds.
var volcanoAdmissions = []string{"/jobs/mutate", "/jobs/validate", "/podgroups/mutate", "/queues/mutate", "/queues/validate"}

// Node is one fake node.
type Node struct {
	Name string
	// GPUs is the node's nvidia.com/gpu capacity.
	GPUs int64
	// Labels are added to the kwok and well-known labels.
	Labels map[string]string
}

// Options say what a member runs.
type Options struct {
	// Name is the member's name (its Cluster's name in Karmada); required.
	Name string
	// Dir receives logs/ and the member's certificates and configuration (required).
	Dir string
	// BinDir holds the binaries (Tools); default framework.AssetsDir().
	BinDir string
	// Nodes are the kwok nodes (at least one).
	Nodes []Node
	// StartTimeout bounds each process's wait until it serves; default 120s.
	StartTimeout time.Duration
}

// Member is a running member cluster.
type Member struct {
	Name string
	Env  *framework.Env
	// Config is an administrator's config (envtest's admin client certificate; CAData set).
	Config *rest.Config
	Client client.Client
	// Kubeconfig is Config as a file.
	Kubeconfig string
	// Processes are kwok and Volcano's, in start order (etcd and kube-apiserver belong to Env).
	Processes []*framework.Process
	// StartupTime is the wall time Start took.
	StartupTime time.Duration
	nodes       []Node
}

// Start brings the member up and returns once kwok reports every node Ready, Volcano's webhooks are
// served and its controllers and scheduler serve, and the Queues root and default exist.
func Start(ctx context.Context, o Options) (m *Member, err error) {
	begin := time.Now()
	if o.Name == "" || o.Dir == "" || len(o.Nodes) == 0 {
		return nil, errors.New("membercluster: Options needs Name, Dir and at least one Node")
	}
	if o.BinDir == "" {
		o.BinDir = framework.AssetsDir()
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
		return nil, fmt.Errorf("membercluster: %s missing from %s: run 'hack/tools.sh %s'", strings.Join(missing, ", "), o.BinDir, strings.Join(missing, " "))
	}
	root := framework.RepoRoot()
	env, err := framework.Start(framework.Options{CRDDirs: []string{
		filepath.Join(root, "config", "crd"), filepath.Join(root, "_output", "crds", "volcano"),
	}})
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", o.Name, err)
	}
	m = &Member{Name: o.Name, Env: env, Config: env.Config, Client: env.Client, Kubeconfig: filepath.Join(o.Dir, "kubeconfig"), nodes: o.Nodes}
	defer func() {
		if err != nil {
			err = fmt.Errorf("member %s: %w\n%s", o.Name, err, m.LogTails(15))
			_ = m.Stop()
			m = nil
		}
	}()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return m, fmt.Errorf("creating %s: %w", o.Dir, err)
	}
	if err := framework.WriteKubeconfig(env.Config, m.Kubeconfig); err != nil {
		return m, err
	}
	logs := filepath.Join(o.Dir, "logs")
	nopts := framework.NeighbourOptions{Kubeconfig: m.Kubeconfig, LogDir: logs, BinDir: o.BinDir, StartTimeout: o.StartTimeout}

	// kwok plays the kubelets: nodes Ready, pods Running, pods owned by a Job Succeeded.
	kwokPort, err := framework.FreePort()
	if err != nil {
		return m, err
	}
	kwokConfig := filepath.Join(o.Dir, "kwok.yaml")
	// An explicit configuration keeps kwok off any ~/.kwok/kwok.yaml; the stages are kwok's defaults
	// (localproc.KwokStages).
	if err := os.WriteFile(kwokConfig, []byte("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n"), 0o644); err != nil {
		return m, fmt.Errorf("writing %s: %w", kwokConfig, err)
	}
	kwok, err := framework.StartProcess(ctx, nopts, "kwok", []string{
		"--kubeconfig=" + m.Kubeconfig,
		"--config=" + kwokConfig,
		"--config=" + localproc.KwokStages(o.BinDir),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + kwokNodeValue,
		"--node-ip=127.0.0.1", "--cidr=127.64.0.1/10",
		"--server-address=" + loopback(kwokPort),
	}, framework.HTTPReady("http://"+loopback(kwokPort)+"/healthz"))
	if err != nil {
		return m, err
	}
	m.Processes = append(m.Processes, kwok)
	if err := m.createNodes(ctx); err != nil {
		return m, err
	}

	// Volcano's webhook-manager with a self-signed certificate that is its own CA; its configurations
	// (URL mode) are registered first: it only injects the caBundle into existing ones.
	hookPort, err := framework.FreePort()
	if err != nil {
		return m, err
	}
	certDir := filepath.Join(o.Dir, "volcano-webhook")
	ca, err := framework.WriteSelfSignedCert(certDir)
	if err != nil {
		return m, err
	}
	if err := registerVolcanoWebhooks(ctx, m.Client, loopback(hookPort), ca); err != nil {
		return m, err
	}
	hook, err := framework.StartProcess(ctx, nopts, "vc-webhook-manager", []string{
		"--kubeconfig=" + m.Kubeconfig,
		"--listen-address=127.0.0.1", "--port=" + strconv.Itoa(hookPort),
		"--webhook-url=https://" + loopback(hookPort),
		"--tls-cert-file=" + filepath.Join(certDir, "tls.crt"), "--tls-private-key-file=" + filepath.Join(certDir, "tls.key"),
		"--ca-cert-file=" + filepath.Join(certDir, "tls.crt"),
		"--enabled-admission=" + strings.Join(volcanoAdmissions, ","),
		"--enable-healthz=false",
	}, tlsAnswers(ca, "https://"+loopback(hookPort)+"/healthz-probe"))
	if err != nil {
		return m, err
	}
	m.Processes = append(m.Processes, hook)
	vcm, err := framework.StartVolcanoControllers(ctx, nopts)
	if err != nil {
		return m, err
	}
	m.Processes = append(m.Processes, vcm)
	vsched, err := framework.StartVolcanoScheduler(ctx, nopts)
	if err != nil {
		return m, err
	}
	m.Processes = append(m.Processes, vsched)
	if err := m.createQueues(ctx); err != nil {
		return m, err
	}
	m.StartupTime = time.Since(begin)
	return m, nil
}

// createNodes creates the kwok nodes and waits until kwok reports all of them Ready.
func (m *Member) createNodes(ctx context.Context) error {
	for _, n := range m.nodes {
		node := nodeObject(n)
		if err := m.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		// kube-apiserver's TaintNodesByCondition admission taints every new Node not-ready, and no
		// node-lifecycle controller runs here to lift it once kwok reports the node Ready.
		if err := untaintNotReady(ctx, m.Client, node.Name); err != nil {
			return err
		}
	}
	var ready int
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := m.Client.List(ctx, &nodes, client.MatchingLabels{KwokNodeLabel: kwokNodeLabelValue}); err != nil {
			return false, nil //nolint:nilerr // a failed list is retried until the timeout
		}
		ready = 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == len(m.nodes), nil
	})
	if err != nil {
		return fmt.Errorf("only %d of %d kwok nodes became Ready within 90s (kwok marks them Ready): %w", ready, len(m.nodes), err)
	}
	return nil
}

// untaintNotReady removes the node.kubernetes.io/not-ready taint from a node.
func untaintNotReady(ctx context.Context, c client.Client, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return err
		}
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return nil
		}
		node.Spec.Taints = kept
		if err := c.Update(ctx, &node); err != nil {
			return fmt.Errorf("removing the not-ready taint from node %s: %w", name, err)
		}
		return nil
	})
}

func nodeObject(n Node) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		GPUResource:                     *resource.NewQuantity(n.GPUs, resource.DecimalSI),
	}
	labels := map[string]string{
		KwokNodeLabel:          kwokNodeLabelValue,
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels,
			Annotations: map[string]string{KwokNodeAnnotation: kwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(), Phase: corev1.NodeRunning,
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
}

// GPUs is the total nvidia.com/gpu capacity of the member's nodes.
func (m *Member) GPUs() int64 {
	var n int64
	for _, node := range m.nodes {
		n += node.GPUs
	}
	return n
}

// createQueues creates Volcano's Queues root and default (Volcano's installation creates them).
func (m *Member) createQueues(ctx context.Context) error {
	for _, name := range []string{"root", "default"} {
		q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(name != "root")}}
		if err := m.Client.Create(ctx, q); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Volcano Queue %s: %w", name, err)
		}
	}
	return nil
}

// Stop stops Volcano's processes, kwok and the control plane. Safe to call twice.
func (m *Member) Stop() error {
	if m == nil {
		return nil
	}
	var errs []error
	for i := len(m.Processes) - 1; i >= 0; i-- {
		errs = append(errs, m.Processes[i].Stop())
	}
	m.Processes = nil
	errs = append(errs, m.Env.Stop())
	m.Env = nil
	return errors.Join(errs...)
}

// Crashed names the processes that have exited.
func (m *Member) Crashed() []string {
	var out []string
	for _, p := range m.Processes {
		if p.Exited() {
			out = append(out, p.Name)
		}
	}
	return out
}

// LogTails is the last n lines of every process's log.
func (m *Member) LogTails(n int) string {
	var b strings.Builder
	for _, p := range m.Processes {
		b.WriteString(p.LogTail(n))
		b.WriteString("\n")
	}
	return b.String()
}

// tlsAnswers is a readiness check: url answers anything over TLS verified with caPEM (Volcano's
// webhook server has no health endpoint of its own).
func tlsAnswers(caPEM []byte, url string) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
