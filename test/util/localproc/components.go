package localproc

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Stage is components started together; the next stage starts once all of them are ready.
type Stage []Component

// Names lists the stage's component names.
func (s Stage) Names() []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = c.Name
	}
	return out
}

// controllerManagerControllers are the controllers kube-controller-manager runs in a local cluster
// (names as `kube-controller-manager --help` lists them in 1.36 and 1.37): enough for Jobs, namespace
// deletion, ownerReference cleanup, service accounts and PodDisruptionBudget status (without the
// disruption controller a budget's status.disruptionsAllowed stays 0, and gang preemption counts
// every pod it selects as a violation).
var controllerManagerControllers = []string{
	"disruption-controller",
	"garbage-collector-controller",
	"job-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
}

// ServiceClusterIPRange is the API server's Service range. On kwok nodes no traffic uses it; with
// hack/localcluster's real nodes, kube-proxy programs it on the host (docs/development.md).
const ServiceClusterIPRange = "10.96.0.0/16"

// KubernetesServiceIP is the kubernetes Service's ClusterIP (the first address of
// ServiceClusterIPRange), which in-cluster clients dial.
var KubernetesServiceIP = net.IPv4(10, 96, 0, 1)

// KwokStages is the stage file hack/tools.sh writes beside bin/kwok: kwok's default stages as kwokctl
// configures them (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete),
// from kwok's own embedded files. kwok v0.8 has no built-in stages and refuses to start without them.
func KwokStages(bin string) string { return filepath.Join(bin, "kwok-stages.yaml") }

// Kwok's node selection: the nodes a local cluster creates carry this annotation, and kwok manages
// only those.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
)

// KubeCore is the Kubernetes core of a cluster in start stages: etcd; kube-apiserver;
// kube-controller-manager and kwok (fake nodes). The cluster's PKI must exist.
func KubeCore(c Cluster, bin string) ([]Stage, error) { return KubeCoreWith(c, bin, nil, nil) }

// KubeCoreWith is KubeCore with extra kube-apiserver flags and extra kube-controller-manager
// controllers (hack/localcluster's real nodes add the kubelet client certificate and the controllers
// real pods need: the kube-root-ca.crt publisher and the EndpointSlice controller).
func KubeCoreWith(c Cluster, bin string, apiserverFlags, controllers []string) ([]Stage, error) {
	apiserver, err := KubeAPIServer(c, bin, append([]string{
		// No node-lifecycle controller runs here, so nothing would lift the not-ready taint this
		// plugin puts on new Nodes; kwok reports the nodes Ready instead.
		"--disable-admission-plugins=TaintNodesByCondition"}, apiserverFlags...)...)
	if err != nil {
		return nil, err
	}
	kcm, err := KubeControllerManager(c, bin, append(append([]string{}, controllerManagerControllers...), controllers...))
	if err != nil {
		return nil, err
	}
	return []Stage{{Etcd(c, bin)}, {apiserver}, {kcm, Kwok(c, bin)}}, nil
}

// Etcd is the cluster's etcd on its client and peer ports, data in c.EtcdDir().
func Etcd(c Cluster, bin string) Component {
	pt := c.Ports()
	etcdPeer := "http://" + Loopback(pt.EtcdPeer)
	etcdClient := "http://" + Loopback(pt.EtcdClient)
	etcdName := "hyperbatch-" + c.Name
	return Component{
		Name: "etcd", Binary: filepath.Join(bin, "etcd"), StartTimeout: 30 * time.Second,
		Args: []string{
			"--name=" + etcdName,
			"--data-dir=" + c.EtcdDir(),
			"--listen-client-urls=" + etcdClient,
			"--advertise-client-urls=" + etcdClient,
			"--listen-peer-urls=" + etcdPeer,
			"--initial-advertise-peer-urls=" + etcdPeer,
			"--initial-cluster=" + etcdName + "=" + etcdPeer,
			"--initial-cluster-state=new",
			// A throwaway development store: skip fsync so thousands of objects land in seconds.
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=8589934592",
			"--log-level=warn",
		},
		Ready: HTTPReady(http.DefaultClient, etcdClient+"/health", `"health":"true"`),
	}
}

// KubeAPIServer is the cluster's kube-apiserver with the request-header (aggregation) flags; extra
// flags (the admission plugins a role disables) are appended.
func KubeAPIServer(c Cluster, bin string, extra ...string) (Component, error) {
	p := c.PKI()
	pt := c.Ports()
	tlsClient, err := p.TLSClient()
	if err != nil {
		return Component{}, err
	}
	args := []string{
		"--etcd-servers=http://" + Loopback(pt.EtcdClient),
		"--bind-address=" + c.APIServerHost(),
		"--advertise-address=" + c.APIServerHost(),
		"--secure-port=" + strconv.Itoa(pt.APIServer),
		"--cert-dir=" + filepath.Join(p.Dir, "kube-apiserver"),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--allow-privileged=true",
		// Request-header authentication, so components delegating authentication find a complete
		// kube-system/extension-apiserver-authentication ConfigMap, and kube-aggregator can
		// authenticate to an aggregated apiserver (Karmada's).
		"--requestheader-client-ca-file=" + p.CACert,
		"--requestheader-allowed-names=" + FrontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.ProxyCert,
		"--proxy-client-key-file=" + p.ProxyKey,
		"--profiling=false",
	}
	if c.APIHost == "" {
		// The "kubernetes" Endpoints may not hold a loopback address; nothing reaches the API
		// server through the Service here, so do not reconcile it. With an APIHost (real nodes)
		// the default lease reconciler points the Service at it.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	return Component{
		Name: "kube-apiserver", Binary: filepath.Join(bin, "kube-apiserver"), StartTimeout: 120 * time.Second,
		Args:  append(args, extra...),
		Ready: HTTPReady(tlsClient, "https://"+c.APIServerAddr()+"/readyz", ""),
	}, nil
}

// KubeControllerManager is the cluster's kube-controller-manager running controllers.
func KubeControllerManager(c Cluster, bin string, controllers []string) (Component, error) {
	p := c.PKI()
	pt := c.Ports()
	kc := c.Kubeconfig()
	tlsClient, err := p.TLSClient()
	if err != nil {
		return Component{}, err
	}
	return Component{
		Name: "kube-controller-manager", Binary: filepath.Join(bin, "kube-controller-manager"), StartTimeout: 60 * time.Second,
		Args: []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--controllers=" + strings.Join(controllers, ","),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(pt.ControllerManager),
			"--cert-dir=" + filepath.Join(p.Dir, "kube-controller-manager"),
			"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
			"--leader-elect=false",
			"--root-ca-file=" + p.CACert,
			"--service-account-private-key-file=" + p.SAKey,
			"--profiling=false",
		},
		Ready: HTTPReady(tlsClient, "https://"+Loopback(pt.ControllerManager)+"/healthz", ""),
	}, nil
}

// KwokConfig is where WriteKwokConfig puts the cluster's kwok configuration; Kwok passes it with
// --config when it exists.
func (c Cluster) KwokConfig() string { return filepath.Join(c.Dir, "kwok", "kwok.yaml") }

// Kwok is the cluster's kwok: it manages the nodes annotated KwokNodeAnnotation=KwokNodeValue.
func Kwok(c Cluster, bin string) Component {
	config := KwokStages(bin)
	if _, err := os.Stat(c.KwokConfig()); err == nil {
		config = c.KwokConfig() // kwok's stages too, with held pods kept Running
	}
	return KwokComponent(bin, c.Kubeconfig(), filepath.Join(c.Dir, "kwok"), config, Loopback(c.Ports().Kwok))
}

// KwokComponent is bin/kwok against the kubeconfig's cluster with the stage configuration config,
// managing the nodes annotated KwokNodeAnnotation=KwokNodeValue (and their pods), working in workDir
// and serving its health endpoint on addr (host:port).
func KwokComponent(bin, kubeconfig, workDir, config, addr string) Component {
	return Component{
		Name: "kwok", Binary: filepath.Join(bin, "kwok"), StartTimeout: 60 * time.Second,
		// KWOK_WORKDIR keeps kwok from reading a user's ~/.kwok/kwok.yaml.
		Env: []string{"KWOK_WORKDIR=" + workDir},
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--config=" + config,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeValue,
			// Node and pod addresses are status strings only; keep them on loopback.
			"--node-ip=127.0.0.1",
			"--cidr=127.64.0.1/10",
			"--server-address=" + addr,
		},
		Ready: HTTPReady(http.DefaultClient, "http://"+addr+"/healthz", ""),
	}
}

// HyperbatchOptions tune hyperbatch's components.
type HyperbatchOptions struct {
	// DiscoveryConfig, when set, is the manager's --discovery-config (HyperNode discovery).
	DiscoveryConfig string
	// Admission, when set, is the manager's --admission (webhook, policy or auto); unset keeps the
	// manager's default (webhook).
	Admission string
}

// Hyperbatch is hyperbatch's own components for the cluster's role: the manager (webhooks in URL mode
// on loopback, controllers, certificate rotator) and, where pods run (standalone, member), the
// scheduler (with c.SchedulerConfig(), which WriteSchedulerConfig writes). On a Karmada plane the
// manager runs in control-plane mode: the HyperJob, lifecycle and WorkloadPolicy controllers, and
// the HyperJob, VolcanoJob and PropagationPolicy webhooks registered on the Karmada apiserver.
func Hyperbatch(c Cluster, bin string, o HyperbatchOptions) (Stage, error) {
	if c.Role != RoleStandalone && c.Role != RoleMember && c.Role != RoleKarmada {
		return nil, fmt.Errorf("cluster %s: no hyperbatch components for role %q", c.Name, c.Role)
	}
	p := c.PKI()
	pt := c.Ports()
	kc := c.Kubeconfig()
	tlsClient, err := p.TLSClient()
	if err != nil {
		return nil, err
	}
	manager := Component{
		Name: "manager", Binary: filepath.Join(bin, "manager"), StartTimeout: 90 * time.Second,
		Args: []string{
			"--kubeconfig=" + kc,
			"--metrics-bind-address=" + Loopback(pt.ManagerMetrics),
			"--health-probe-bind-address=" + Loopback(pt.ManagerHealth),
			"--leader-elect=false",
			"--namespace=hyperbatch-system",
			// Webhooks in URL mode on loopback: the manager creates the webhook configurations,
			// generates its CA and serving cert (Secret hyperbatch-system/hyperbatch-webhook-tls)
			// and injects the caBundle, exactly as in a cluster.
			"--webhook-host=127.0.0.1",
			"--webhook-port=" + strconv.Itoa(pt.Webhook),
			"--webhook-url=https://" + Loopback(pt.Webhook),
			"--webhook-cert-dir=" + filepath.Join(p.Dir, "webhook-certs"),
		},
		Ready: HTTPReady(http.DefaultClient, "http://"+Loopback(pt.ManagerHealth)+"/readyz", ""),
	}
	if o.DiscoveryConfig != "" {
		manager.Args = append(manager.Args, "--discovery-config="+o.DiscoveryConfig)
	}
	if o.Admission != "" {
		manager.Args = append(manager.Args, "--admission="+o.Admission)
	}
	switch c.Role {
	case RoleKarmada:
		manager.Args = append(manager.Args, "--mode=control-plane")
		return Stage{manager}, nil
	case RoleMember:
		manager.Args = append(manager.Args, "--mode=member")
	}
	scheduler := Component{
		Name: "scheduler", Binary: filepath.Join(bin, "scheduler"), StartTimeout: 90 * time.Second,
		Args: []string{
			"--config=" + c.SchedulerConfig(),
			"--feature-gates=" + SchedulerFeatureGates,
			"--v=2", // each gang's decision and wait reason (docs/scheduler.md)
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(pt.Scheduler),
			"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
			"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		},
		Ready: HTTPReady(tlsClient, "https://"+Loopback(pt.Scheduler)+"/readyz", ""),
	}
	return Stage{manager, scheduler}, nil
}

// VolcanoControllers are the controllers of Volcano's controller-manager hyperbatch's tests and local
// clusters run: Jobs (PodGroup and pods), PodGroups (for plain pods), Queues (status) and the garbage
// collector (ttlSecondsAfterFinished). No HyperNode discovery, which would overwrite the local tree.
var VolcanoControllers = []string{"job-controller", "pg-controller", "queue-controller", "gc-controller"}

// VolcanoAdmissions are the webhook-manager's services a local cluster registers (Volcano's Helm chart
// also registers pod webhooks; they serve Volcano's resource-group and budget annotations only, so
// plain pods here are not routed through them).
var VolcanoAdmissions = []string{"/jobs/mutate", "/jobs/validate", "/podgroups/mutate", "/queues/mutate", "/queues/validate"}

// VolcanoControllerManager is vc-controller-manager with VolcanoControllers, leader election off and
// its health endpoint on 127.0.0.1:healthPort.
func VolcanoControllerManager(bin, kubeconfig string, healthPort int) Component {
	return Component{
		Name: "vc-controller-manager", Binary: filepath.Join(bin, "vc-controller-manager"), StartTimeout: 90 * time.Second,
		Args: []string{
			"--kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--controllers=" + strings.Join(VolcanoControllers, ","),
			"--enable-healthz=true",
			"--healthz-address=" + Loopback(healthPort),
			"--enable-metrics=false",
			"--worker-threads=2",
		},
		Ready: HTTPReady(ProbeClient, "http://"+Loopback(healthPort)+"/healthz", ""),
	}
}

// Volcano is Volcano's controller-manager and, with webhooks, its webhook-manager (own serving
// certificate from the cluster's CA; the webhook configurations are the caller's to install).
func Volcano(c Cluster, bin string, webhooks bool) Stage {
	pt := c.Ports()
	p := c.PKI()
	out := Stage{VolcanoControllerManager(bin, c.Kubeconfig(), pt.VolcanoHealth)}
	if !webhooks {
		return out
	}
	return append(out, Component{
		Name: "vc-webhook-manager", Binary: filepath.Join(bin, "vc-webhook-manager"), StartTimeout: 90 * time.Second,
		Args: []string{
			"--kubeconfig=" + c.Kubeconfig(),
			"--listen-address=127.0.0.1",
			"--port=" + strconv.Itoa(pt.VolcanoWebhook),
			"--webhook-url=https://" + Loopback(pt.VolcanoWebhook),
			"--tls-cert-file=" + p.VolcanoWebhookCert,
			"--tls-private-key-file=" + p.VolcanoWebhookKey,
			// The webhook-manager writes this CA into its webhook configurations' caBundle.
			"--ca-cert-file=" + p.CACert,
			"--enabled-admission=" + strings.Join(VolcanoAdmissions, ","),
			"--enable-healthz=false",
		},
		Ready: TLSAnswers(p.CACert, "https://"+Loopback(pt.VolcanoWebhook)+"/healthz-probe"),
	})
}

// JobSetController is jobset-controller with a configuration file (JobSetConfig); it is ready once
// /readyz on healthPort passes and its webhook server on webhookPort serves the JobSet webhooks.
func JobSetController(bin, kubeconfig, config string, healthPort, webhookPort int) Component {
	return Component{
		Name: "jobset-controller", Binary: filepath.Join(bin, "jobset-controller"), StartTimeout: 90 * time.Second,
		Args: []string{"--kubeconfig=" + kubeconfig, "--config=" + config},
		// Its readyz passes once the webhook server listens, which is before the JobSet webhooks are
		// registered; a JobSet created in between gets 404 from the mutating webhook.
		Ready: AllReady(HTTPReady(ProbeClient, "http://"+Loopback(healthPort)+"/readyz", ""),
			HandlerServed(ProbeClient, "https://"+Loopback(webhookPort)+"/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
			HandlerServed(ProbeClient, "https://"+Loopback(webhookPort)+"/validate-jobset-x-k8s-io-v1alpha2-jobset")),
	}
}

// JobSet is the cluster's JobSet controller; its configuration is written here, with the certificate
// the cluster's CA signed (the webhook configurations are the caller's to install).
func JobSet(c Cluster, bin string) (Stage, error) {
	pt := c.Ports()
	if err := os.WriteFile(c.JobSetConfig(), []byte(JobSetConfig(pt.JobSetWebhook, pt.JobSetHealth, c.PKI().JobSetCertDir)), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", c.JobSetConfig(), err)
	}
	return Stage{JobSetController(bin, c.Kubeconfig(), c.JobSetConfig(), pt.JobSetHealth, pt.JobSetWebhook)}, nil
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
`, Loopback(healthPort), webhookPort, certDir)
}

// SchedulerFeatureGates is hyperbatch-scheduler's --feature-gates, as the chart ships it
// (charts/hyperbatch values scheduler.featureGates; test/chart checks they agree).
// NominatedNodeNameForExpectation (beta, on by default since 1.35) makes kube-scheduler patch
// status.nominatedNodeName on every pod that waits at Permit, which is every gang member but the
// one completing the quorum: one more apiserver write per pod, for a hint no other scheduler reads
// (docs/scheduler.md, "Kubernetes 1.36 scheduler features").
const SchedulerFeatureGates = "NominatedNodeNameForExpectation=false"

// SchedulerFeatureGateMap is SchedulerFeatureGates as a map, for a scheduler run in the test process.
func SchedulerFeatureGateMap() map[string]bool {
	out := map[string]bool{}
	for _, kv := range strings.Split(SchedulerFeatureGates, ",") {
		name, value, _ := strings.Cut(kv, "=")
		out[name] = value == "true"
	}
	return out
}

// DocumentedSchedulerConfig is docs/scheduler-config.yaml below root (the scheduler's documented
// KubeSchedulerConfiguration) as a generic map.
func DocumentedSchedulerConfig(root string) (map[string]any, error) {
	path := filepath.Join(root, "docs", "scheduler-config.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the documented scheduler config: %w", err)
	}
	js, err := yaml.ToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var conf map[string]any
	if err := json.Unmarshal(js, &conf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if conf == nil {
		return nil, fmt.Errorf("%s is empty: it must hold a KubeSchedulerConfiguration", path)
	}
	return conf, nil
}

// WriteSchedulerConfig writes conf to path with clientConnection.kubeconfig set to kubeconfig. The
// file is JSON, which is valid YAML for kube-scheduler.
func WriteSchedulerConfig(conf map[string]any, kubeconfig, path string) error {
	conn, _ := conf["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	conf["clientConnection"] = conn
	out, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding scheduler configuration: %w", err)
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
