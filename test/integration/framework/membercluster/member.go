// Package membercluster starts a member cluster for multi-cluster tests on loopback: a named cluster
// of role member from test/util/localproc (localproc.UpMember: etcd, kube-apiserver,
// kube-controller-manager, kwok with fake nodes that carry nvidia.com/gpu and an optional HyperNode
// tree, hyperbatch's and Volcano's CRDs, Volcano's webhook-manager and controller-manager and,
// optionally, hyperbatch's manager and scheduler), the same bring-up `make run-multicluster` uses,
// plus Volcano's own scheduler, so a Volcano Job a Karmada plane propagates here is admitted,
// scheduled, run and completed by real components (kwok plays the kubelets). Every process logs to
// <Dir>/logs/<name>.log.
package membercluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// GPUResource is the accelerator the fake nodes advertise.
const GPUResource corev1.ResourceName = localproc.GPUResource

// Kwok's markers: it manages the nodes with KwokNodeAnnotation=fake; KwokNodeLabel=kwok selects them.
const (
	KwokNodeAnnotation = localproc.KwokNodeAnnotation
	KwokNodeLabel      = localproc.KwokNodeLabel
)

// Tools are the binaries a member runs.
var Tools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kwok", "vc-webhook-manager", "vc-controller-manager", "vc-scheduler"}

// Node is one fake node.
type Node struct {
	Name string
	// GPUs is the node's nvidia.com/gpu capacity.
	GPUs int64
	// Labels are added to the kwok and well-known labels.
	Labels map[string]string
	// Leaf names the tier-1 HyperNode the node hangs off (a tier-2 HyperNode <member>-spine joins
	// the leaves); empty: in no HyperNode.
	Leaf string
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
	// StartTimeout, when set, bounds each process's wait until it serves instead of its own default.
	StartTimeout time.Duration
	// Hyperbatch runs hyperbatch's manager (member mode) and hyperbatch-scheduler in the member (the
	// project's bin/manager and bin/scheduler, `make build`), with docs/scheduler-config.yaml.
	Hyperbatch bool
}

// Member is a running member cluster.
type Member struct {
	Name string
	// Config is an administrator's config (client certificate in system:masters; CAData set).
	Config *rest.Config
	Client client.Client
	// Kubeconfig is Config as a file.
	Kubeconfig string
	// Processes in start order (etcd and kube-apiserver first).
	Processes []*framework.Process
	// Ready is how long each step of Start took.
	Ready []localproc.Step
	// StartupTime is the wall time Start took.
	StartupTime time.Duration
	// Cluster is the member as a localproc cluster (ports, PKI, log files).
	Cluster localproc.Cluster

	procs *localproc.Procs
	nodes []Node
}

// Start brings the member up and returns once kwok reports every node Ready, the HyperNodes exist,
// Volcano's webhooks are served, its controllers and scheduler (and hyperbatch's, with Hyperbatch)
// serve, and the Queues root and default exist.
func Start(ctx context.Context, o Options) (m *Member, err error) {
	begin := time.Now()
	if o.Name == "" || o.Dir == "" || len(o.Nodes) == 0 {
		return nil, errors.New("membercluster: Options needs Name, Dir and at least one Node")
	}
	if o.BinDir == "" {
		o.BinDir = framework.AssetsDir()
	}
	tools := Tools
	if o.Hyperbatch {
		tools = append(append([]string{}, tools...), "manager", "scheduler")
	}
	var missing []string
	for _, t := range tools {
		if _, err := os.Stat(filepath.Join(o.BinDir, t)); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("membercluster: %s missing from %s: run 'hack/tools.sh %s' (manager, scheduler: make build)", strings.Join(missing, ", "), o.BinDir, strings.Join(missing, " "))
	}
	base, err := localproc.FreePortBlock(localproc.PortCount)
	if err != nil {
		return nil, err
	}
	c := localproc.Cluster{Name: o.Name, Dir: o.Dir, PortBase: base, Role: localproc.RoleMember}
	m = &Member{Name: o.Name, Kubeconfig: c.Kubeconfig(), Cluster: c, nodes: o.Nodes, procs: &localproc.Procs{StartTimeout: o.StartTimeout}}
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
	if err := localproc.PrepareCluster(o.Dir, c); err != nil {
		return m, err
	}
	root := framework.RepoRoot()
	if o.Hyperbatch {
		conf, err := localproc.DocumentedSchedulerConfig(root)
		if err != nil {
			return m, err
		}
		if err := localproc.WriteSchedulerConfig(conf, c.Kubeconfig(), c.SchedulerConfig()); err != nil {
			return m, err
		}
	}
	nodes := make([]localproc.MemberNode, len(o.Nodes))
	for i, n := range o.Nodes {
		nodes[i] = localproc.MemberNode{Name: n.Name, GPUs: n.GPUs, Leaf: n.Leaf, Labels: n.Labels}
	}
	m.Ready, err = localproc.UpMember(ctx, c, o.BinDir, localproc.MemberOptions{
		Nodes:      nodes,
		CRDDirs:    localproc.MemberCRDDirs(root),
		Hyperbatch: o.Hyperbatch,
		Root:       root,
	}, m.procs.Start)
	m.Processes = m.procs.List
	if err != nil {
		return m, err
	}
	if m.Config, err = clientcmd.BuildConfigFromFlags("", m.Kubeconfig); err != nil {
		return m, fmt.Errorf("loading %s: %w", m.Kubeconfig, err)
	}
	m.Config.QPS, m.Config.Burst = 100, 200
	if m.Client, err = client.New(m.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return m, fmt.Errorf("client for member %s: %w", o.Name, err)
	}
	// Volcano's own scheduler (schedulerName "volcano"), as a member with Volcano installed has it.
	vsched, err := framework.StartVolcanoScheduler(ctx, framework.NeighbourOptions{
		Kubeconfig: m.Kubeconfig, LogDir: c.LogsDir(), BinDir: o.BinDir, StartTimeout: o.StartTimeout})
	if err != nil {
		return m, err
	}
	m.procs.List = append(m.procs.List, vsched)
	m.Processes = m.procs.List
	m.StartupTime = time.Since(begin)
	return m, nil
}

// GPUs is the total nvidia.com/gpu capacity of the member's nodes.
func (m *Member) GPUs() int64 {
	var n int64
	for _, node := range m.nodes {
		n += node.GPUs
	}
	return n
}

// StopAPIServer stops the member's kube-apiserver (the member is lost for Karmada; its etcd and
// everything else keep running). RestartAPIServer brings it back.
func (m *Member) StopAPIServer() error {
	p := m.procs.Find("kube-apiserver")
	if p == nil {
		return fmt.Errorf("member %s has no kube-apiserver", m.Name)
	}
	// kube-apiserver drains its watches before it exits on SIGTERM and may outlast the grace;
	// StopWithin then kills it. Either way it is gone, which is all a lost member needs.
	if err := p.StopWithin(5 * time.Second); err != nil && !p.Exited() {
		return err
	}
	return nil
}

// RestartAPIServer brings the member's control plane back, as after the member's reboot: its
// kube-apiserver again with its command line (waiting for /readyz), then Volcano's controller-manager.
// Volcano v1.14.0-alpha.0's job controller does not resume by itself after its apiserver returns:
// seen in TestMemberLoss, a Job created in the member after the restart got its PodGroup Inqueue from
// vc-scheduler, but the job controller logged nothing after the restart and created no pod
// (docs/multicluster.md, "Found").
func (m *Member) RestartAPIServer(ctx context.Context) error {
	for _, component := range []string{"kube-apiserver", "vc-controller-manager"} {
		if err := m.procs.Restart(ctx, m.Cluster, component); err != nil {
			return fmt.Errorf("member %s: restarting %s: %w", m.Name, component, err)
		}
	}
	m.Processes = m.procs.List
	return nil
}

// Stop stops every process, last first. Safe to call twice.
func (m *Member) Stop() error {
	if m == nil || m.procs == nil {
		return nil
	}
	return m.procs.StopAll()
}

// Crashed names the processes that have exited.
func (m *Member) Crashed() []string { return m.procs.Crashed() }

// LogTails is the last n lines of every process's log.
func (m *Member) LogTails(n int) string {
	if m == nil || m.procs == nil {
		return ""
	}
	return m.procs.LogTails(n)
}
