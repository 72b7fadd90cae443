package scheduler

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// Kueue's Topology Aware Scheduling as a peer: Kueue v0.19.2's manager (bin/kueue-manager, built by
// `make bench-tools` from hack/tools/kueue; never by make test) admits the gangs as batch/v1 Jobs, the
// Job controller of kube-controller-manager creates their pods, Kueue's TopologyUngater gives each pod
// its node and the stock kube-scheduler (bin/scheduler, default-scheduler only) binds it.
//
// The set-up is Kueue's documented one for TAS (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/
// and https://kueue.sigs.k8s.io/docs/tasks/run/topology_aware_scheduling/, whose sample objects are
// site/static/examples/tas/sample-queues.yaml in kubernetes-sigs/kueue): a Topology whose levels are
// the nodes' labels from the top of the tree down to kubernetes.io/hostname (the docs recommend the
// hostname as the lowest level), a ResourceFlavor with nodeLabels and topologyName, a ClusterQueue
// using it and a LocalQueue per namespace; each Job carries kueue.x-k8s.io/queue-name and, on its pod
// template, kueue.x-k8s.io/podset-required-topology (hard gangs) or podset-preferred-topology (soft)
// naming the level of the gang's tier.
//
// The manager runs Kueue's documented configuration (config/components/manager/controller_manager_config.yaml
// of the module, gathered by `hack/crds.sh kueue`) with only what loopback needs changed:
//   - internalCertManagement.enable false (Kueue's cert-manager set-up): its internal certificates
//     name the Service kueue-webhook-service.kueue-system.svc, which a cluster without Services and DNS
//     cannot reach; the webhooks serve our 127.0.0.1 certificate instead and the webhook
//     configurations (config/components/webhook/manifests.yaml, with the namespaceSelector its
//     kustomization adds) point at it by URL;
//   - its metrics certificate, which that set-up mounts at /etc/kueue/metrics/certs, is our loopback
//     certificate placed there in a private mount namespace (kueueMetricsCertWrapper);
//   - health, metrics, webhook and pprof on free loopback ports, leader election off (one replica);
//   - the VisibilityOnDemand feature gate off: its API server reads its certificate from /visibility,
//     and it serves only the pending-workloads listing, no part of admission;
//   - client QPS/burst peerKubeQPS like every other scheduler here (above the documented 300/500).
// kube-controller-manager runs the Job controller with the same client QPS (its default, 20, would
// make pod creation the bottleneck).

const (
	kueueQueue     = "peers"
	kueueFlavor    = "peers-tas"
	kueueTopology  = "peers-tree"
	kueueNamespace = "kueue-system"
	kueuePoolLabel = "bench.hyperbatch.dev/node-pool" // the flavor's nodeLabels (the docs' cloud.provider.com/node-group)
	kueuePool      = "peers"
	kueueQueueName = "kueue.x-k8s.io/queue-name"
	kueueRequired  = "kueue.x-k8s.io/podset-required-topology"
	kueuePreferred = "kueue.x-k8s.io/podset-preferred-topology"
	// Two-level podset slices (Kueue's TAS docs, "two-level scheduling"): each slice of
	// podset-slice-size pods inside one domain of the podset-slice-required-topology level.
	kueueSliceRequired = "kueue.x-k8s.io/podset-slice-required-topology"
	kueueSliceSize     = "kueue.x-k8s.io/podset-slice-size"
)

var kueueGV = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

func kueueObj(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(kueueGV.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// kueueDir is where `hack/crds.sh kueue` gathered Kueue's CRDs and manifests.
func kueueDir() string { return filepath.Join(framework.RepoRoot(), "_output", "kueue") }

// kueueLevels are the Topology's levels, top first, ending with kubernetes.io/hostname.
func (t peerTree) kueueLevels() []string {
	var out []string
	for tier := t.tiers(); tier >= 1; tier-- {
		out = append(out, t.levelLabel(tier))
	}
	if out[len(out)-1] != corev1.LabelHostname {
		out = append(out, corev1.LabelHostname)
	}
	return out
}

// setupKueue installs Kueue's CRDs and the size's Topology, ResourceFlavor and ClusterQueue (quota
// the workload never reaches: every node's CPU and memory).
func (p *peerEnv) setupKueue(ctx context.Context) error {
	dir := kueueDir()
	if _, err := os.Stat(filepath.Join(dir, "webhooks.yaml")); err != nil {
		return fmt.Errorf("Kueue's CRDs and manifests are missing from %s: run 'make bench-tools' (hack/crds.sh kueue): %w", dir, err)
	}
	if _, err := envtest.InstallCRDs(p.env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true,
		MaxTime: time.Minute}); err != nil {
		return fmt.Errorf("installing Kueue's CRDs: %w", err)
	}
	if _, err := p.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var levels []any
	for _, l := range p.tree.kueueLevels() {
		levels = append(levels, map[string]any{"nodeLabel": l})
	}
	cpu := p.tree.nodes * p.tree.peerSlots
	objs := []*unstructured.Unstructured{
		kueueObj("Topology", "", kueueTopology, map[string]any{"levels": levels}),
		kueueObj("ResourceFlavor", "", kueueFlavor, map[string]any{"nodeLabels": map[string]any{kueuePoolLabel: kueuePool}, "topologyName": kueueTopology}),
		kueueObj("ClusterQueue", "", kueueQueue, map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory"},
				"flavors": []any{map[string]any{"name": kueueFlavor, "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": fmt.Sprint(cpu)},
					map[string]any{"name": "memory", "nominalQuota": fmt.Sprintf("%dGi", 256*p.tree.nodes)},
				}}},
			}},
		}),
	}
	for _, o := range objs {
		if err := p.env.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating Kueue %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// kueueLocalQueue creates the namespace's LocalQueue and waits until the running manager reports it
// active (so the clock never counts Kueue learning about the queue).
func (p *peerEnv) kueueLocalQueue(ctx context.Context, ns string) error {
	lq := kueueObj("LocalQueue", ns, kueueQueue, map[string]any{"clusterQueue": kueueQueue})
	if err := p.env.Client.Create(ctx, lq); err != nil {
		return fmt.Errorf("creating LocalQueue %s/%s: %w", ns, kueueQueue, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(kueueGV.WithKind("LocalQueue"))
		if err := p.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kueueQueue}, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Active" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// kueueJob is a gang as Kueue's users write it: an Indexed Job in the LocalQueue whose pod template
// asks for the gang's tier, hard or soft.
func (p *peerEnv) kueueJob(ns string, g peerGang) *batchv1.Job {
	key := kueueRequired
	if g.soft {
		key = kueuePreferred
	}
	tmpl := builders.MakePodTemplate("c", "registry.example/x").Scheduler(defaultName).
		Request(corev1.ResourceCPU, "1").Request(corev1.ResourceMemory, "64Mi").Limit(corev1.ResourceCPU, "1").Limit(corev1.ResourceMemory, "64Mi").
		Annotation(key, p.tree.levelLabel(g.tier)).Annotation(gang.GroupNameAnnotation, g.name).Obj()
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	if g.sub > 0 {
		// Kueue's two-level TAS: each slice of g.sub pods (consecutive completion indexes) inside one
		// domain of the tier-1 level, the podset under the gang's own annotation above.
		tmpl.Annotations[kueueSliceRequired] = p.tree.levelLabel(1)
		tmpl.Annotations[kueueSliceSize] = fmt.Sprint(g.sub)
	}
	return builders.MakeJob(ns, g.name, int32(g.size), tmpl).Label(kueueQueueName, kueueQueue).Obj()
}

// startKueue starts kube-controller-manager's Job controller and Kueue's manager with its webhooks
// registered; stopping the manager removes them. It returns the manager and the Job controller.
func (p *peerEnv) startKueue(ctx context.Context, logDir string) (mgr, jobs *framework.Process, err error) {
	insecure := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check of a self-signed test server
	kcmPort, err := framework.FreePort()
	if err != nil {
		return nil, nil, err
	}
	jobs, err = framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: logDir}, "kube-controller-manager",
		[]string{"--kubeconfig=" + p.kc, "--controllers=job-controller", "--leader-elect=false", "--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", kcmPort), fmt.Sprintf("--kube-api-qps=%d", peerKubeQPS), fmt.Sprintf("--kube-api-burst=%d", peerKubeQPS), "--v=1"},
		framework.HTTPReadyWith(insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)))
	if err != nil {
		return nil, nil, err
	}
	mgr, err = p.startKueueManager(ctx, logDir)
	if err != nil {
		_ = jobs.Stop()
		return nil, nil, err
	}
	return mgr, jobs, nil
}

func (p *peerEnv) startKueueManager(ctx context.Context, logDir string) (*framework.Process, error) {
	var ports [4]int
	for i := range ports {
		var err error
		if ports[i], err = framework.FreePort(); err != nil {
			return nil, err
		}
	}
	health, hook, pprof, metrics := ports[0], ports[1], ports[2], ports[3]
	certDir := filepath.Join(logDir, "kueue-webhook-certs")
	ca, err := framework.WriteSelfSignedCert(certDir)
	if err != nil {
		return nil, err
	}
	documented, err := os.ReadFile(filepath.Join(kueueDir(), "controller_manager_config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading Kueue's documented configuration (run 'make bench-tools'): %w", err)
	}
	conf := map[string]any{}
	if err := yaml.Unmarshal(documented, &conf); err != nil {
		return nil, fmt.Errorf("parsing Kueue's documented configuration: %w", err)
	}
	conf["health"] = map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", health)}
	conf["metrics"] = map[string]any{"bindAddress": fmt.Sprintf("127.0.0.1:%d", metrics)}
	conf["pprofBindAddress"] = fmt.Sprintf("127.0.0.1:%d", pprof)
	conf["webhook"] = map[string]any{"port": hook, "host": "127.0.0.1", "certDir": certDir}
	conf["leaderElection"] = map[string]any{"leaderElect": false}
	conf["internalCertManagement"] = map[string]any{"enable": false}
	conf["clientConnection"] = map[string]any{"qps": peerKubeQPS, "burst": peerKubeQPS}
	conf["featureGates"] = map[string]any{"VisibilityOnDemand": false}
	out, err := yaml.Marshal(conf)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(logDir, "kueue-config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return nil, err
	}
	hooks, err := kueueWebhookConfigs(fmt.Sprintf("127.0.0.1:%d", hook), ca)
	if err != nil {
		return nil, err
	}
	for _, h := range hooks {
		if err := p.env.Client.Create(ctx, h); err != nil {
			return nil, fmt.Errorf("registering Kueue's %s: %w", h.GetName(), err)
		}
	}
	unregister := func() {
		for _, h := range hooks {
			if err := p.env.Client.Delete(context.Background(), h); err != nil && !apierrors.IsNotFound(err) {
				p.b.Logf("removing Kueue's %s: %v", h.GetName(), err)
			}
		}
	}
	wrapper, err := kueueMetricsCertWrapper(logDir, certDir)
	if err != nil {
		unregister()
		return nil, err
	}
	mgr, err := framework.StartProcess(ctx, framework.NeighbourOptions{Kubeconfig: p.kc, LogDir: logDir, BinDir: filepath.Dir(wrapper)},
		"kueue-manager", []string{filepath.Join(framework.RepoRoot(), "bin", "kueue-manager"), "--config=" + path, "--kubeconfig=" + p.kc, "--zap-log-level=info"},
		framework.HTTPReady(fmt.Sprintf("http://127.0.0.1:%d/readyz", health)))
	if err != nil {
		unregister()
		return nil, err
	}
	mgr.OnStop(unregister)
	p.kueuePprof = fmt.Sprintf("http://127.0.0.1:%d", pprof)
	return mgr, nil
}

// kueueMetricsCertWrapper writes <logDir>/wrap/kueue-manager, a script that runs the binary it is
// given in a private mount namespace where /etc/kueue/metrics/certs holds certDir's tls.crt and
// tls.key. With internalCertManagement off, Kueue v0.19.2's manager reads its metrics serving
// certificate from that fixed path (cmd/kueue/main.go: the Secret its cert-manager set-up mounts
// there) and exits without it. The path lives in an overlay over /etc on a tmpfs that disappears
// with the process: the machine's /etc is never written. The script execs, so the process started
// is the manager itself (its CPU and RSS are measured). It needs unshare(1) and the right to mount
// (root or CAP_SYS_ADMIN).
func kueueMetricsCertWrapper(logDir, certDir string) (string, error) {
	dir := filepath.Join(logDir, "wrap")
	over := filepath.Join(logDir, "etc-overlay")
	for _, d := range []string{dir, over} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	script := `#!/bin/sh
# Written by bench/scheduler/peers_kueue_test.go (kueueMetricsCertWrapper): Kueue's manager with its
# metrics certificate at /etc/kueue/metrics/certs, in a private mount namespace.
exec unshare -m --propagation private sh -c '
set -e
mount -t tmpfs kueue-etc "$0"
mkdir -p "$0/upper" "$0/work"
mount -t overlay kueue-etc -o lowerdir=/etc,upperdir="$0/upper",workdir="$0/work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$1/tls.crt" "$1/tls.key" /etc/kueue/metrics/certs/
shift
exec "$@"' "` + over + `" "` + certDir + `" "$@"
`
	path := filepath.Join(dir, "kueue-manager")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil { //nolint:gosec // an executable script
		return "", err
	}
	return path, nil
}

// kueueWebhookConfigs are Kueue's webhook configurations (config/components/webhook/manifests.yaml)
// as its kustomization installs them (named kueue-*, the namespaceSelector leaving kube-system and
// kueue-system out of every job-framework webhook), each pointing at addr by URL with ca.
func kueueWebhookConfigs(addr string, ca []byte) ([]client.Object, error) {
	raw, err := os.ReadFile(filepath.Join(kueueDir(), "webhooks.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading Kueue's webhook manifests (run 'make bench-tools'): %w", err)
	}
	skipSystem := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", kueueNamespace}}}}
	// fix points one webhook at addr and, for a job framework's webhook (not one on Kueue's own
	// kinds), adds the kustomization's namespaceSelector.
	fix := func(cc *admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations, sel **metav1.LabelSelector) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return errors.New("a Kueue webhook without a service path")
		}
		*cc = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + *cc.Service.Path), CABundle: ca}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				if g == kueueGV.Group {
					return nil
				}
			}
		}
		*sel = skipSystem
		return nil
	}
	var out []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding Kueue's webhook manifests: %w", err)
		}
		if doc == nil {
			continue
		}
		js, _ := yaml.Marshal(doc)
		var err error
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = yaml.Unmarshal(js, c)
			for i := 0; err == nil && i < len(c.Webhooks); i++ {
				err = fix(&c.Webhooks[i].ClientConfig, c.Webhooks[i].Rules, &c.Webhooks[i].NamespaceSelector)
			}
			c.Name = "kueue-" + c.Name
			out = append(out, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			err = yaml.Unmarshal(js, c)
			for i := 0; err == nil && i < len(c.Webhooks); i++ {
				err = fix(&c.Webhooks[i].ClientConfig, c.Webhooks[i].Rules, &c.Webhooks[i].NamespaceSelector)
			}
			c.Name = "kueue-" + c.Name
			out = append(out, c)
		}
		if err != nil {
			return nil, fmt.Errorf("Kueue's webhook manifests: %w", err)
		}
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("Kueue's webhook manifests hold %d configurations, expected a mutating and a validating one", len(out))
	}
	return out, nil
}

// kueueAdmissions records when Kueue admitted each Job of a namespace: the first time the watch sees
// it unsuspended.
type kueueAdmissions struct {
	mu sync.Mutex
	at map[string]time.Time
}

// get is nil-safe: runs of other schedulers have no admissions.
func (a *kueueAdmissions) get(job string) (time.Time, bool) {
	if a == nil {
		return time.Time{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[job]
	return t, ok
}

func (a *kueueAdmissions) see(j *batchv1.Job, now time.Time) {
	if j.Spec.Suspend == nil || *j.Spec.Suspend {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.at[j.Name]; !ok {
		a.at[j.Name] = now
	}
}

// follow watches the namespace's Jobs until ctx ends.
func (a *kueueAdmissions) follow(ctx context.Context, cs kubernetes.Interface, ns string) {
	for ctx.Err() == nil {
		l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		now := time.Now()
		for i := range l.Items {
			a.see(&l.Items[i], now)
		}
		w, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			retryAfterError(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				a.see(j, time.Now())
			}
		}
		w.Stop()
	}
}

// kueueCleanup removes a Kueue run's Jobs, their pods and Workloads while the manager and the Job
// controller still run (no garbage collector runs here).
func (p *peerEnv) kueueCleanup(ns string) {
	ctx := context.Background()
	b := p.b
	// Background: the Jobs go at once (Orphan and Foreground leave a finalizer only a garbage
	// collector removes); the Job controller then creates no more pods, and the pods and Workloads
	// they owned are deleted here.
	if err := retrying(ctx, "deleting the Jobs of namespace "+ns, func(ctx context.Context) error {
		return p.env.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
	}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := p.cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("%s: Jobs not deleted: %v", ns, err)
	}
	deletePods(b, p.cs, ns)
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(kueueGV.WithKind("Workload"))
	if err := retrying(ctx, "deleting Kueue's Workloads of namespace "+ns, func(ctx context.Context) error {
		if err := p.env.Client.DeleteAllOf(ctx, wl, client.InNamespace(ns)); !meta.IsNoMatchError(err) {
			return err
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(kueueGV.WithKind("WorkloadList"))
		err := p.env.Client.List(ctx, l, client.InNamespace(ns))
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("%s: Kueue Workloads not deleted: %v", ns, err)
	}
}

// saveCPUProfile saves a CPU profile over d from the pprof server at base (".../debug/pprof" is
// appended) into path (best effort: a failure is logged with what).
func (p *peerEnv) saveCPUProfile(what string, c *http.Client, base, path string, d time.Duration) {
	if base == "" {
		return
	}
	c.Timeout = d + 30*time.Second
	resp, err := c.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(d.Seconds())))
	if err != nil {
		p.b.Logf("%s CPU profile: %v", what, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		p.b.Logf("%s CPU profile: %v", what, err)
		return
	}
	if resp.StatusCode != http.StatusOK {
		p.b.Logf("%s CPU profile: %s: %s", what, resp.Status, buf.String())
		return
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		p.b.Logf("%s CPU profile: %v", what, err)
	}
}

// levelLabel is the node label of a tier's domains: topology.hyperbatch.dev/{leaf,spine,top} from the
// top of the tree down (the labels hack/localcluster's kwok nodes carry and HyperNode discovery
// reads), kubernetes.io/hostname for a tier of single nodes.
func (t peerTree) levelLabel(tier int) string {
	if tier == 1 && t.fan[1] == 1 {
		return corev1.LabelHostname
	}
	names := []string{"top", "spine", "leaf"}
	return "topology.hyperbatch.dev/" + names[min(t.tiers()-tier, len(names)-1)]
}

// nodeLabels are a node's labels: its hostname, the pool of Kueue's flavor and one label per tier.
func (t peerTree) nodeLabels(i int) map[string]string {
	name := t.nodeName(i)
	l := map[string]string{corev1.LabelHostname: name, kueuePoolLabel: kueuePool}
	for tier := 1; tier <= t.tiers(); tier++ {
		if k := t.levelLabel(tier); k != corev1.LabelHostname {
			l[k] = t.hyperName(tier, i/t.span(tier))
		}
	}
	return l
}
