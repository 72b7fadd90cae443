package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// layout is where `up` runs: the repository, the state's directory, the tool binaries and the first
// cluster's port base.
type layout struct {
	root     string // repository root (hack/crds.sh, config/crd, docs/ are found here)
	dir      string // absolute --dir: the state file, the shared kubeconfig, the first cluster's files
	bin      string // absolute --bin
	images   string // absolute --images: make images' archives, for real nodes
	portBase int
}

func (l layout) kubeconfig() string { return localproc.KubeconfigFile(l.dir) }

// rel shortens a path below the repository root for messages.
func (l layout) rel(path string) string {
	if r, err := filepath.Rel(l.root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// clusters are the clusters one `up` starts, in order. The first lives in --dir itself.
func (l layout) clusters(o upOptions) []localproc.Cluster {
	if o.multicluster {
		return l.multiClusters()
	}
	c := localproc.Cluster{Name: localproc.LegacyClusterName, Dir: l.dir, PortBase: l.portBase, Role: localproc.RoleStandalone, Nodes: o.nodes}
	if o.realNodes > 0 {
		// Real pods reach the API server through the kubernetes Service (10.96.0.1:443), which
		// kube-proxy sends to the advertised address: the bridge gateway, local to this machine.
		c.APIHost = realBridgeIP
	}
	return []localproc.Cluster{c}
}

// requiredTools are built by `make tools` (hack/tools.sh); manager and scheduler by `make build`.
var requiredTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok"}

type upOptions struct {
	nodes  int
	noDemo bool
	// discover lets the manager's HyperNode discovery build the tree from the node labels instead
	// of writing the fixed sample.
	discover bool
	// multicluster starts a Karmada plane and two members (multicluster.go).
	multicluster bool
	// realNodes is the number of real nodes (kubelets with containerd) beside the kwok nodes
	// (realnodes.go); 0 starts none.
	realNodes int
	// chart installs hyperbatch's manager and scheduler with helm on the real nodes instead of
	// starting them as host processes (chart.go).
	chart bool
	neighbourOptions
}

func up(ctx context.Context, l layout, o upOptions) (err error) {
	begin := time.Now()
	topo, err := buildTopology(o.nodes)
	if err != nil {
		return err
	}
	st := localproc.State{Clusters: l.clusters(o)}
	if err := l.preflight(ctx, st, o); err != nil {
		return err
	}
	if err := localproc.PrepareCluster(l.dir, st.Clusters...); err != nil {
		return err
	}
	if err := st.Write(l.dir); err != nil {
		return err
	}
	s := &localproc.Session{Dir: l.dir, Root: l.root, State: st, Logf: step}
	defer func() {
		if err != nil {
			fmt.Fprintln(os.Stderr, "up failed; stopping what was started ...")
			s.StopAll()
			if o.realNodes > 0 {
				if cerr := downRealNodes(l, st); cerr != nil {
					fmt.Fprintf(os.Stderr, "removing the real nodes' host changes: %v\n", cerr)
				}
			}
		}
	}()
	if o.multicluster {
		if err = l.upMulticluster(ctx, s, st, o); err != nil {
			return err
		}
		step("Karmada plane and %d members up in %s", len(st.Clusters)-1, since(begin))
		l.printMultiUsage(st)
		return nil
	}
	for _, cl := range st.Clusters {
		switch cl.Role {
		case localproc.RoleStandalone:
			err = l.upStandalone(ctx, s, cl, topo, o)
		default:
			err = fmt.Errorf("cluster %s: no bring-up for role %q", cl.Name, cl.Role)
		}
		if err != nil {
			return err
		}
	}
	step("local cluster up in %s", since(begin))
	l.printUsage(st.Clusters[0])
	return nil
}

// upStandalone brings up one cluster with everything: the Kubernetes core, the CRDs, kwok nodes and
// the HyperNode tree, hyperbatch and the neighbours, then the acceptance checks.
func (l layout) upStandalone(ctx context.Context, s *localproc.Session, cl localproc.Cluster, topo topology, o upOptions) error {
	conf, err := localproc.DocumentedSchedulerConfig(l.root)
	if err != nil {
		return err
	}
	if err := localproc.WriteSchedulerConfig(conf, cl.Kubeconfig(), cl.SchedulerConfig()); err != nil {
		return err
	}
	// Pods are admitted by the apiserver's admission policies where it serves them (1.36+).
	ho := localproc.HyperbatchOptions{Admission: "auto"}
	if o.discover {
		if ho.DiscoveryConfig, err = writeDiscoveryConfig(cl); err != nil {
			return err
		}
	}
	var real *realNodes
	core, err := localproc.KubeCore(cl, l.bin)
	if o.realNodes > 0 {
		r := newRealNodes(l, cl, o.realNodes)
		real = &r
		p := cl.PKI()
		// The API server reaches the kubelets (logs, exec) with the admin client certificate, which
		// their x509 authentication accepts; real pods need the kube-root-ca.crt ConfigMap in their
		// namespace and EndpointSlices for kube-proxy.
		core, err = localproc.KubeCoreWith(cl, l.bin,
			[]string{"--kubelet-client-certificate=" + p.AdminCert, "--kubelet-client-key=" + p.AdminKey,
				// The nodes' names resolve nowhere; their InternalIPs are addresses of the bridge.
				"--kubelet-preferred-address-types=InternalIP"},
			// The chart's Deployments (chart mode) need the deployment and replicaset controllers. A
			// node whose kubelet stops must go NotReady as in any cluster: the node lifecycle
			// controller marks it Unknown once its Lease is older than the grace period (default
			// 50 s) and taints it node.kubernetes.io/unreachable (NoSchedule, NoExecute); the
			// taint eviction controller deletes its pods once their toleration (300 s by the
			// DefaultTolerationSeconds admission plugin) runs out. kwok renews its nodes' Leases (keepKwokNodesAlive).
			[]string{"root-ca-certificate-publisher-controller", "endpointslice-controller", "deployment-controller", "replicaset-controller",
				"node-lifecycle-controller", "taint-eviction-controller"})
		if err == nil {
			keepKwokNodesAlive(core)
		}
	}
	if err != nil {
		return err
	}
	hb, err := localproc.Hyperbatch(cl, l.bin, ho)
	if err != nil {
		return err
	}
	if o.chart {
		hb = nil // helm installs them, after the real nodes are up
	}
	nb, err := l.neighbours(cl, o.neighbourOptions)
	if err != nil {
		return err
	}
	if real != nil {
		// The API server binds the bridge gateway: the bridge comes first.
		if err := real.prepare(); err != nil {
			return err
		}
		step("real nodes: bridge %s (%s), cgroups %s-0..%d, configuration in %s", realBridge, realPodCIDR, realCgroupRoot, real.n-1, l.rel(real.dir))
	}
	for _, stage := range core {
		if err := s.Start(ctx, cl.Name, stage...); err != nil {
			return err
		}
	}
	if err := l.installCRDs(ctx, cl); err != nil {
		return err
	}
	k, err := newKube(cl)
	if err != nil {
		return err
	}
	if err := k.createTopology(ctx, topo, !o.discover); err != nil {
		return err
	}
	if real != nil {
		if err := l.upRealNodes(ctx, s, k, *real); err != nil {
			return err
		}
	}
	if err := k.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	if err := k.installNeighbourWebhooks(ctx, o.neighbourOptions); err != nil {
		return err
	}
	if err := s.Start(ctx, cl.Name, append(hb, nb...)...); err != nil {
		return err
	}
	if o.chart {
		if err := l.installChart(ctx, k, *real); err != nil {
			return err
		}
	}
	if o.discover {
		if err := k.waitDiscoveredTree(ctx, topo); err != nil {
			return err
		}
	}
	if !o.noVolcano {
		if err := k.createQueues(ctx); err != nil {
			return err
		}
	}
	if !o.noDemo {
		if err := k.demo(ctx); err != nil {
			return err
		}
		if !o.noVolcano {
			if err := k.demoVolcanoJob(ctx); err != nil {
				return err
			}
		}
		if real != nil {
			if err := k.demoRealNode(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// preflight fails early, with cause and fix, on what would otherwise fail halfway.
func (l layout) preflight(ctx context.Context, st localproc.State, o upOptions) error {
	for _, cl := range st.Clusters {
		if cl.PortBase < 1024 || cl.PortBase > 65535-localproc.PortCount {
			return fmt.Errorf("--port-base %d is out of range: the cluster needs %d ports from it, pick 1024..%d", cl.PortBase, localproc.PortCount, 65535-localproc.PortCount)
		}
	}
	var alive []string
	for _, cl := range st.Clusters {
		running, err := localproc.ReadPIDFiles(cl.PidsDir())
		if err != nil {
			return err
		}
		for _, rp := range running {
			if rp.Alive {
				alive = append(alive, fmt.Sprintf("%s (PID %d)", rp.Process(), rp.PID))
			}
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("a local cluster already runs from %s: %s.\nStop it first with `make down` (go run ./hack/localcluster down --dir %s)",
			l.rel(l.dir), strings.Join(alive, ", "), l.rel(l.dir))
	}
	if o.chart && o.realNodes == 0 {
		return errChartNeedsRealNodes
	}
	if o.realNodes != 0 {
		if o.multicluster || o.discover {
			return errors.New("--real-nodes goes with the single cluster's fixed HyperNode tree only: drop --multicluster and --discover")
		}
		if o.chart && !isExecutable(filepath.Join(l.bin, "helm")) {
			return fmt.Errorf("--chart needs %s: hack/tools.sh helm", l.rel(filepath.Join(l.bin, "helm")))
		}
		for _, cl := range st.Clusters {
			if err := newRealNodes(l, cl, o.realNodes).preflight(); err != nil {
				return err
			}
		}
	}

	var missing, building []string
	tools := requiredTools
	if o.multicluster {
		tools = append(append([]string{}, tools...), multiclusterTools...)
	}
	for _, t := range tools {
		if !isExecutable(filepath.Join(l.bin, t)) {
			missing = append(missing, t)
			if _, err := os.Stat(filepath.Join(l.bin, t+".tmp")); err == nil {
				building = append(building, t)
			}
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("missing tools in %s: %s.\nBuild them with `make tools` (or hack/tools.sh %s); the first build takes several minutes",
			l.rel(l.bin), strings.Join(missing, ", "), strings.Join(missing, " "))
		if len(building) > 0 {
			msg += fmt.Sprintf(".\n%s seem(s) to be building right now (a .tmp file exists): wait for that build to finish", strings.Join(building, ", "))
		}
		return errors.New(msg)
	}
	if _, err := os.Stat(filepath.Join(l.root, "docs", "scheduler-config.yaml")); err != nil {
		return fmt.Errorf("docs/scheduler-config.yaml is missing (the scheduler's configuration template): %w", err)
	}

	for _, cl := range st.Clusters {
		var busy []string
		for _, pu := range cl.Ports().All() {
			if inUse, owner := localproc.PortBusy(pu.Port); inUse {
				busy = append(busy, fmt.Sprintf("  127.0.0.1:%d (%s) is in use by %s", pu.Port, pu.Use, owner))
			}
		}
		if len(busy) > 0 {
			return fmt.Errorf("ports needed by the local cluster %s are taken:\n%s\nStop whatever holds them (an older local cluster: make down), or move this cluster with --port-base (it uses %d..%d)",
				cl.Name, strings.Join(busy, "\n"), cl.PortBase, cl.PortBase+localproc.PortCount-1)
		}
	}

	for _, b := range []struct{ name, pkg string }{{"manager", "./cmd/manager"}, {"scheduler", "./cmd/scheduler"}} {
		out := filepath.Join(l.bin, b.name)
		if isExecutable(out) {
			continue
		}
		t := time.Now()
		step("building %s (missing; `make build` builds it too) ...", l.rel(out))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, b.pkg)
		cmd.Dir = l.root
		if output, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s failed: %w\n%s\nFix the build error above, then retry", b.pkg, err, tail(string(output), 30))
		}
		step("built %s (%s)", l.rel(out), since(t))
	}
	return nil
}

// installCRDs runs hack/crds.sh (upstream CRDs into _output/crds/) if present, applies every CRD under
// _output/crds/ and config/crd/ with bin/kubectl and waits until all are Established.
func (l layout) installCRDs(ctx context.Context, cl localproc.Cluster) error {
	t := time.Now()
	script := filepath.Join(l.root, "hack", "crds.sh")
	if _, err := os.Stat(script); err == nil {
		logPath := cl.LogFile("crds")
		if err := l.runLogged(ctx, logPath, "bash", script); err != nil {
			return fmt.Errorf("hack/crds.sh failed (%w).\n%s", err, logTail(logPath))
		}
	} else {
		step("hack/crds.sh not found: applying only the CRDs already in _output/crds/ and config/crd/")
	}
	var files []string
	for _, d := range []string{filepath.Join(l.root, "_output", "crds"), filepath.Join(l.root, "config", "crd")} {
		found, err := crdFiles(d)
		if err != nil {
			return err
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return errors.New("no CRD manifests in _output/crds/ or config/crd/: run hack/crds.sh (upstream CRDs) and regenerate config/crd (`make generate`)")
	}
	kubectl := filepath.Join(l.bin, "kubectl")
	args := []string{"--kubeconfig=" + cl.Kubeconfig(), "apply", "--server-side", "--force-conflicts",
		"--field-manager=hyperbatch-localcluster"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	logPath := cl.LogFile("kubectl-apply-crds")
	if err := l.runLogged(ctx, logPath, kubectl, args...); err != nil {
		return fmt.Errorf("applying CRDs failed (%w).\n%s", err, logTail(logPath))
	}
	if err := waitCRDsEstablished(ctx, cl.Kubeconfig(), files, 90*time.Second); err != nil {
		return fmt.Errorf("CRDs did not become Established: %w", err)
	}
	step("%d CRD manifests applied and Established (%s)", len(files), since(t))
	return nil
}

// crdFiles lists the YAML files below dir that hold a CustomResourceDefinition (kustomization files and
// patches are skipped). A missing dir yields nothing.
func crdFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		ext := filepath.Ext(path)
		if d.IsDir() || (ext != ".yaml" && ext != ".yml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == "kind: CustomResourceDefinition" {
				out = append(out, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing CRDs in %s: %w", dir, err)
	}
	return out, nil
}

// runLogged runs a short-lived command, appending its output to logPath.
func (l layout) runLogged(ctx context.Context, logPath, name string, args ...string) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, "# %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = l.root
	cmd.Stdout = f
	cmd.Stderr = f
	return cmd.Run()
}

func (l layout) printUsage(cl localproc.Cluster) {
	kc := l.kubeconfig()
	fmt.Printf(`
Local cluster is running (API server https://%s).
  export KUBECONFIG=%s
  %s get nodes
  %s get hypernodes
  logs:  %s/
  stop:  make down
`, cl.APIServerAddr(), kc, l.rel(filepath.Join(l.bin, "kubectl")), l.rel(filepath.Join(l.bin, "kubectl")), l.rel(cl.LogsDir()))
}

func (l layout) printMultiUsage(st localproc.State) {
	kc := l.kubeconfig()
	kubectl := l.rel(filepath.Join(l.bin, "kubectl"))
	fmt.Printf(`
Karmada control plane and members are running (one kubeconfig, a context per cluster).
  export KUBECONFIG=%s
  %s --context %s get clusters           # the Karmada apiserver (hyperbatch in control-plane mode)
  %s --context %s get hyperjobs -A
`, kc, kubectl, st.Clusters[0].Context(), kubectl, st.Clusters[0].Context())
	for _, m := range st.Clusters[1:] {
		fmt.Printf("  %s --context %s get nodes,hypernodes   # member %s (logs %s/)\n", kubectl, m.Context(), m.Name, l.rel(m.LogsDir()))
		fmt.Printf("  %s   # the demo's children there\n", childrenHint(kubectl, m.Context(), demoNamespace))
	}
	fmt.Printf("  logs:  %s/\n  stop:  make down\n", l.rel(st.Clusters[0].LogsDir()))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

// logTail is the end of a component's log for error messages.
func logTail(path string) string { return localproc.LogTail(path, localproc.TailLines) }

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// keepKwokNodesAlive makes kwok hold a Lease for each of its nodes (kube-node-lease, 40 s, renewed
// as a kubelet does) when the node lifecycle controller runs: kwok's default stages refresh a node's
// status only every 10-20 minutes, so without a Lease the controller marked the kwok nodes Unknown
// (and tainted them unreachable) 50 s after their creation until kwok's next status write.
func keepKwokNodesAlive(core []localproc.Stage) {
	for _, st := range core {
		for i := range st {
			if st[i].Name == "kwok" {
				st[i].Args = append(st[i].Args, "--node-lease-duration-seconds=40")
			}
		}
	}
}
