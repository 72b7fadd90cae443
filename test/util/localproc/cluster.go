package localproc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Role says which components a cluster runs.
type Role string

// The roles. A state holds one standalone cluster (`make run`), or a Karmada control plane and its
// member clusters (`make run-multicluster`).
const (
	// RoleStandalone is one cluster with everything: the Kubernetes core, hyperbatch's manager and
	// scheduler, and the neighbours (Volcano, JobSet, Kubeflow Trainer).
	RoleStandalone Role = "standalone"
	// RoleKarmada is a Karmada control plane (KarmadaPlane): etcd, kube-apiserver as the Karmada
	// apiserver, karmada-aggregated-apiserver, karmada-webhook, kube-controller-manager (namespace and
	// garbage collector), karmada-controller-manager, karmada-scheduler, and hyperbatch's manager in
	// control-plane mode. No Volcano controller runs there: the templates stay inert.
	RoleKarmada Role = "karmada"
	// RoleMember is a member cluster of a Karmada plane: the Kubernetes core, kwok nodes with
	// accelerators and a HyperNode tree, Volcano's controllers and webhooks, hyperbatch's manager and
	// scheduler.
	RoleMember Role = "member"
)

// Cluster is one named local cluster: its directory, port block and role. Started lists its
// components in start order (written by the Session); `down` stops them in the reverse order.
type Cluster struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"` // absolute
	PortBase int    `json:"portBase"`
	Role     Role   `json:"role"`
	Nodes    int    `json:"nodes,omitempty"`
	// APIHost is the address kube-apiserver binds, advertises and serves its certificate for; empty
	// is 127.0.0.1. A real-node cluster uses its pods' bridge gateway, an address of this machine
	// that pods reach through the kubernetes Service and nothing outside does.
	APIHost string   `json:"apiHost,omitempty"`
	Started []string `json:"started,omitempty"`
}

// APIServerHost is the address kube-apiserver listens on (APIHost, or 127.0.0.1).
func (c Cluster) APIServerHost() string {
	if c.APIHost == "" {
		return "127.0.0.1"
	}
	return c.APIHost
}

// APIServerAddr is kube-apiserver's host:port.
func (c Cluster) APIServerAddr() string {
	return net.JoinHostPort(c.APIServerHost(), strconv.Itoa(c.Ports().APIServer))
}

// LogsDir holds the components' logs.
func (c Cluster) LogsDir() string { return filepath.Join(c.Dir, "logs") }

// PidsDir holds the PID files.
func (c Cluster) PidsDir() string { return filepath.Join(c.Dir, "pids") }

// EtcdDir is etcd's data directory.
func (c Cluster) EtcdDir() string { return filepath.Join(c.Dir, "etcd") }

// PKIDir holds the cluster's certificates and keys.
func (c Cluster) PKIDir() string { return filepath.Join(c.Dir, "pki") }

// PKI names the cluster's credential files.
func (c Cluster) PKI() PKI {
	p := NewPKI(c.PKIDir())
	if ip := net.ParseIP(c.APIHost); ip != nil {
		p.ServingIPs = append(p.ServingIPs, ip)
	}
	return p
}

// SchedulerConfig is hyperbatch-scheduler's configuration file.
func (c Cluster) SchedulerConfig() string { return filepath.Join(c.Dir, "scheduler-config.yaml") }

// JobSetConfig is the JobSet controller's configuration file.
func (c Cluster) JobSetConfig() string { return filepath.Join(c.Dir, "jobset-config.yaml") }

// Ports are the cluster's loopback ports.
func (c Cluster) Ports() Ports { return PortsFrom(c.PortBase) }

// Kubeconfig is the cluster's own kubeconfig, which its components use: only its context, or, for
// the first cluster of a state (whose directory is the state's), the shared file with every context
// and this one current.
func (c Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// Context is the cluster's context name in the kubeconfig: hyperbatch-<name>.
func (c Cluster) Context() string { return "hyperbatch-" + c.Name }

// LogFile is <dir>/logs/<component>.log.
func (c Cluster) LogFile(component string) string {
	return filepath.Join(c.LogsDir(), component+".log")
}

// PIDFile is <dir>/pids/<cluster>.<component>.pid.
func (c Cluster) PIDFile(component string) string {
	return filepath.Join(c.PidsDir(), c.Name+"."+component+".pid")
}

// Process is the name messages use for one of the cluster's components: <cluster>/<component>.
func (c Cluster) Process(component string) string { return processName(c.Name, component) }

// Ports are the loopback ports of one cluster, all derived from its port base.
type Ports struct {
	APIServer, EtcdClient, EtcdPeer, ControllerManager, Kwok, ManagerMetrics, ManagerHealth, Scheduler, Webhook int
	// The neighbours: Volcano's controller-manager (health) and webhook-manager, the JobSet controller
	// (Trainer's are below).
	VolcanoHealth, VolcanoWebhook, JobSetWebhook, JobSetHealth int
	// A Karmada plane's own processes: karmada-aggregated-apiserver, karmada-webhook (server and
	// health), karmada-controller-manager and karmada-scheduler (health and Prometheus metrics).
	KarmadaAggregated, KarmadaWebhook, KarmadaWebhookHealth, KarmadaControllerHealth, KarmadaSchedulerHealth int
	KarmadaControllerMetrics, KarmadaSchedulerMetrics                                                        int
	// Kubeflow Trainer's controller manager: probes, webhook server, status server.
	TrainerHealth, TrainerWebhook, TrainerStatus int
}

// PortCount is how many consecutive ports from its base one cluster uses.
const PortCount = 23

// PortsFrom lays out a cluster's ports from base.
func PortsFrom(base int) Ports {
	return Ports{
		APIServer: base, EtcdClient: base + 1, EtcdPeer: base + 2, ControllerManager: base + 3,
		Kwok: base + 4, ManagerMetrics: base + 5, ManagerHealth: base + 6, Scheduler: base + 7,
		Webhook: base + 8, VolcanoHealth: base + 9, VolcanoWebhook: base + 10, JobSetWebhook: base + 11,
		JobSetHealth: base + 12, KarmadaAggregated: base + 13, KarmadaWebhook: base + 14, KarmadaWebhookHealth: base + 15,
		KarmadaControllerHealth: base + 16, KarmadaSchedulerHealth: base + 17,
		KarmadaControllerMetrics: base + 18, KarmadaSchedulerMetrics: base + 19,
		TrainerHealth: base + 20, TrainerWebhook: base + 21, TrainerStatus: base + 22,
	}
}

// PortUse names a port and the component flag that claims it (for "port in use" messages).
type PortUse struct {
	Port int
	Use  string
}

// All lists every port with its use.
func (p Ports) All() []PortUse {
	return []PortUse{
		{p.APIServer, "kube-apiserver --secure-port"},
		{p.EtcdClient, "etcd client URL"},
		{p.EtcdPeer, "etcd peer URL"},
		{p.ControllerManager, "kube-controller-manager --secure-port"},
		{p.Kwok, "kwok --server-address"},
		{p.ManagerMetrics, "manager --metrics-bind-address"},
		{p.ManagerHealth, "manager --health-probe-bind-address"},
		{p.Scheduler, "scheduler --secure-port"},
		{p.Webhook, "manager --webhook-port"},
		{p.VolcanoHealth, "vc-controller-manager --healthz-address"},
		{p.VolcanoWebhook, "vc-webhook-manager --port"},
		{p.JobSetWebhook, "jobset-controller webhook.port"},
		{p.JobSetHealth, "jobset-controller health.healthProbeBindAddress"},
		{p.KarmadaAggregated, "karmada-aggregated-apiserver --secure-port"},
		{p.KarmadaWebhook, "karmada-webhook --secure-port"},
		{p.KarmadaWebhookHealth, "karmada-webhook --health-probe-bind-address"},
		{p.KarmadaControllerHealth, "karmada-controller-manager --health-probe-bind-address"},
		{p.KarmadaSchedulerHealth, "karmada-scheduler --health-probe-bind-address"},
		{p.KarmadaControllerMetrics, "karmada-controller-manager --metrics-bind-address"},
		{p.KarmadaSchedulerMetrics, "karmada-scheduler --metrics-bind-address"},
		{p.TrainerHealth, "trainer-controller-manager health.healthProbeBindAddress"},
		{p.TrainerWebhook, "trainer-controller-manager webhook.port"},
		{p.TrainerStatus, "trainer-controller-manager statusServer.port"},
	}
}

// State is the state file (<dir>/cluster.json) of one `up`: its clusters, in start order.
type State struct {
	Clusters []Cluster `json:"clusters"`
}

// StateFile is where a state lives below its directory.
func StateFile(dir string) string { return filepath.Join(dir, "cluster.json") }

// KubeconfigFile is the state's kubeconfig, with a context per cluster.
func KubeconfigFile(dir string) string { return filepath.Join(dir, "kubeconfig") }

// Cluster returns the state's cluster of that name.
func (s *State) Cluster(name string) (*Cluster, bool) {
	for i := range s.Clusters {
		if s.Clusters[i].Name == name {
			return &s.Clusters[i], true
		}
	}
	return nil, false
}

// Write stores the state in dir.
func (s State) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the cluster state: %w", err)
	}
	if err := os.WriteFile(StateFile(dir), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", StateFile(dir), err)
	}
	return nil
}

// LegacyClusterName is the name of the one cluster of a state file from before clusters had names
// ({"portBase": N, "nodes": M}), and of `make run`'s cluster.
const LegacyClusterName = "local"

// ReadState reads dir's state file. A state file of the older one-cluster layout reads as one
// cluster named LegacyClusterName in dir.
func ReadState(dir string) (State, bool) {
	b, err := os.ReadFile(StateFile(dir))
	if err != nil {
		return State{}, false
	}
	var s State
	if json.Unmarshal(b, &s) == nil && len(s.Clusters) > 0 {
		return s, true
	}
	var legacy struct {
		PortBase int `json:"portBase"`
		Nodes    int `json:"nodes"`
	}
	if json.Unmarshal(b, &legacy) != nil || legacy.PortBase == 0 {
		return State{}, false
	}
	// That layout started its components in this fixed order.
	started := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "manager", "scheduler",
		"vc-controller-manager", "vc-webhook-manager", "jobset-controller"}
	return State{Clusters: []Cluster{{Name: LegacyClusterName, Dir: dir, PortBase: legacy.PortBase, Role: RoleStandalone,
		Nodes: legacy.Nodes, Started: started}}}, true
}

// WriteKubeconfigs writes dir's kubeconfig with one context per cluster (the first current) and, for
// each cluster whose directory is not dir, its own kubeconfig with only its context. Every cluster's
// PKI must exist.
func WriteKubeconfigs(dir string, clusters []Cluster) error {
	all := clientcmdapi.NewConfig()
	for i, c := range clusters {
		own, err := c.kubeconfig()
		if err != nil {
			return err
		}
		for k, v := range own.Clusters {
			all.Clusters[k] = v
		}
		for k, v := range own.AuthInfos {
			all.AuthInfos[k] = v
		}
		for k, v := range own.Contexts {
			all.Contexts[k] = v
		}
		if i == 0 {
			all.CurrentContext = own.CurrentContext
		}
		if filepath.Clean(c.Dir) != filepath.Clean(dir) {
			if err := clientcmd.WriteToFile(*own, c.Kubeconfig()); err != nil {
				return fmt.Errorf("writing kubeconfig %s: %w", c.Kubeconfig(), err)
			}
		}
	}
	if err := clientcmd.WriteToFile(*all, KubeconfigFile(dir)); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", KubeconfigFile(dir), err)
	}
	return nil
}

func (c Cluster) kubeconfig() (*clientcmdapi.Config, error) {
	p := c.PKI()
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		return b, nil
	}
	ca, err := read(p.CACert)
	if err != nil {
		return nil, err
	}
	cert, err := read(p.AdminCert)
	if err != nil {
		return nil, err
	}
	key, err := read(p.AdminKey)
	if err != nil {
		return nil, err
	}
	name, user := c.Context(), c.Context()+"-admin"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + c.APIServerAddr(), CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return cfg, nil
}

// PrepareDirs starts a cluster from a fresh etcd store, PID and PKI directory; logs of the last run
// are overwritten.
func (c Cluster) PrepareDirs() error {
	for _, d := range []string{c.EtcdDir(), c.PidsDir(), c.PKIDir()} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	for _, d := range []string{c.LogsDir(), c.PidsDir(), c.PKIDir(), filepath.Join(c.Dir, "kwok")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

// Session starts the processes of one `up` stage by stage, records each cluster's start order in the
// state file, and can stop what it started in the reverse order (when `up` fails).
type Session struct {
	Dir   string // the state's directory
	Root  string // working directory of the processes
	State State
	// Logf reports progress (each component's readiness); nil is silent.
	Logf    func(format string, args ...any)
	started []*Proc
}

// Start launches components of the named cluster together, then waits until each is ready.
func (s *Session) Start(ctx context.Context, cluster string, cs ...Component) error {
	cl, ok := s.State.Cluster(cluster)
	if !ok {
		return fmt.Errorf("no cluster %q in the state of %s", cluster, s.Dir)
	}
	var procs []*Proc
	for _, c := range cs {
		p, err := Start(c, StartOptions{Process: cl.Process(c.Name), LogPath: cl.LogFile(c.Name), PIDPath: cl.PIDFile(c.Name), Dir: s.Root, Session: true})
		if err != nil {
			return err
		}
		s.started = append(s.started, p)
		cl.Started = append(cl.Started, c.Name)
		procs = append(procs, p)
	}
	if err := s.State.Write(s.Dir); err != nil {
		return err
	}
	for _, p := range procs {
		t := time.Now()
		if err := p.WaitReady(ctx); err != nil {
			return err
		}
		if s.Logf != nil {
			s.Logf("%s ready (%s, log %s)", p.Process, time.Since(t).Round(100*time.Millisecond), rel(s.Root, p.LogPath))
		}
	}
	return nil
}

// StopAll stops what the session started, last first.
func (s *Session) StopAll() {
	for i := len(s.started) - 1; i >= 0; i-- {
		_ = s.started[i].StopWithin(10 * time.Second)
	}
	s.started = nil
}

// StopOrder sorts a cluster's recorded processes for stopping: those the state does not know first,
// then the reverse of the start order.
func (c Cluster) StopOrder(procs []Recorded) []Recorded {
	rank := map[string]int{}
	for i, n := range c.Started {
		rank[n] = len(c.Started) - i
	}
	out := append([]Recorded(nil), procs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank[out[j].Component] < rank[out[j-1].Component]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && len(r) > 0 && r[0] != '.' {
		return r
	}
	return path
}
