package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// layout is where one local cluster lives: its directory, the tool binaries and its ports.
type layout struct {
	root     string // repository root (hack/crds.sh, config/crd, docs/ are found here)
	dir      string // absolute --dir
	bin      string // absolute --bin
	portBase int
}

func (l layout) logsDir() string         { return filepath.Join(l.dir, "logs") }
func (l layout) pidsDir() string         { return filepath.Join(l.dir, "pids") }
func (l layout) etcdDir() string         { return filepath.Join(l.dir, "etcd") }
func (l layout) pkiDir() string          { return filepath.Join(l.dir, "pki") }
func (l layout) kubeconfig() string      { return filepath.Join(l.dir, "kubeconfig") }
func (l layout) schedulerConfig() string { return filepath.Join(l.dir, "scheduler-config.yaml") }
func (l layout) stateFile() string       { return filepath.Join(l.dir, "cluster.json") }
func (l layout) logFile(name string) string {
	return filepath.Join(l.logsDir(), name+".log")
}
func (l layout) pidFile(name string) string { return filepath.Join(l.pidsDir(), name+".pid") }
func (l layout) ports() ports               { return portsFrom(l.portBase) }

// rel shortens a path below the repository root for messages.
func (l layout) rel(path string) string {
	if r, err := filepath.Rel(l.root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// state is what `down` and `status` need to know about a running cluster.
type state struct {
	PortBase int `json:"portBase"`
	Nodes    int `json:"nodes"`
}

// stopOrder is the reverse of the start order; down stops components in this order.
var stopOrder = []string{"jobset-controller", "vc-webhook-manager", "vc-controller-manager", "scheduler", "manager", "kwok", "kube-controller-manager", "kube-apiserver", "etcd"}

// requiredTools are built by `make tools` (hack/tools.sh); manager and scheduler by `make build`.
var requiredTools = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok"}

type upOptions struct {
	nodes  int
	noDemo bool
	// discover lets the manager's HyperNode discovery build the tree from the node labels instead
	// of writing the fixed sample.
	discover bool
	neighbourOptions
}

// session tracks the processes one `up` started so a failure can stop them again.
type session struct {
	l       layout
	started []*proc
}

func (s *session) startAll(ctx context.Context, cs ...component) error {
	var procs []*proc
	for _, c := range cs {
		p, err := s.l.start(c)
		if err != nil {
			return err
		}
		s.started = append(s.started, p)
		procs = append(procs, p)
	}
	for _, p := range procs {
		t := time.Now()
		if err := p.waitReady(ctx); err != nil {
			return err
		}
		step("%s ready (%s, log %s)", p.Name, since(t), s.l.rel(p.logPath))
	}
	return nil
}

func (s *session) stopAll() {
	for i := len(s.started) - 1; i >= 0; i-- {
		s.started[i].stop(10 * time.Second)
	}
	s.started = nil
}

func up(ctx context.Context, l layout, o upOptions) (err error) {
	begin := time.Now()
	topo, err := buildTopology(o.nodes)
	if err != nil {
		return err
	}
	if err := l.preflight(ctx); err != nil {
		return err
	}
	if err := l.prepareDirs(); err != nil {
		return err
	}
	p := newPKI(l.pkiDir())
	if err := p.generate(); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	if err := l.writeKubeconfig(p); err != nil {
		return err
	}
	if err := l.writeSchedulerConfig(); err != nil {
		return err
	}
	if err := l.writeState(state{PortBase: l.portBase, Nodes: o.nodes}); err != nil {
		return err
	}
	cs, err := l.components(p)
	if err != nil {
		return err
	}
	if o.discover {
		if err := l.writeDiscoveryConfig(); err != nil {
			return err
		}
		cs.Manager.Args = append(cs.Manager.Args, "--discovery-config="+l.discoveryConfigFile())
	}
	if err := l.checkNeighbourTools(cs, o.neighbourOptions); err != nil {
		return err
	}
	if err := l.writeJobSetConfig(p); err != nil {
		return err
	}

	s := &session{l: l}
	defer func() {
		if err != nil {
			fmt.Fprintln(os.Stderr, "up failed; stopping what was started ...")
			s.stopAll()
		}
	}()
	if err := s.startAll(ctx, cs.Etcd); err != nil {
		return err
	}
	if err := s.startAll(ctx, cs.APIServer); err != nil {
		return err
	}
	if err := s.startAll(ctx, cs.ControllerManager, cs.Kwok); err != nil {
		return err
	}
	if err := l.installCRDs(ctx); err != nil {
		return err
	}
	k, err := newKube(l)
	if err != nil {
		return err
	}
	if err := k.createTopology(ctx, topo, !o.discover); err != nil {
		return err
	}
	if err := k.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	if err := k.installNeighbourWebhooks(ctx, p, o.neighbourOptions); err != nil {
		return err
	}
	if err := s.startAll(ctx, append([]component{cs.Manager, cs.Scheduler}, cs.neighbours(o.neighbourOptions)...)...); err != nil {
		return err
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
	}
	step("local cluster up in %s", since(begin))
	l.printUsage()
	return nil
}

// preflight fails early, with cause and fix, on what would otherwise fail halfway.
func (l layout) preflight(ctx context.Context) error {
	if l.portBase < 1024 || l.portBase > 65535-portCount {
		return fmt.Errorf("--port-base %d is out of range: the cluster needs %d ports from it, pick 1024..%d", l.portBase, portCount, 65535-portCount)
	}
	running, err := l.recordedProcs()
	if err != nil {
		return err
	}
	var alive []string
	for _, rp := range running {
		if rp.Alive {
			alive = append(alive, fmt.Sprintf("%s (PID %d)", rp.Name, rp.PID))
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("a local cluster already runs from %s: %s.\nStop it first with `make down` (go run ./hack/localcluster down --dir %s)",
			l.rel(l.dir), strings.Join(alive, ", "), l.rel(l.dir))
	}

	var missing, building []string
	for _, t := range requiredTools {
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

	var busy []string
	for _, pu := range l.ports().all() {
		if inUse, owner := portBusy(pu.Port); inUse {
			busy = append(busy, fmt.Sprintf("  127.0.0.1:%d (%s) is in use by %s", pu.Port, pu.Use, owner))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("ports needed by the local cluster are taken:\n%s\nStop whatever holds them (an older local cluster: make down), or move this cluster with --port-base (it uses %d..%d)",
			strings.Join(busy, "\n"), l.portBase, l.portBase+portCount-1)
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

// prepareDirs starts from a fresh etcd store and PID directory; logs of the last run are overwritten.
func (l layout) prepareDirs() error {
	for _, d := range []string{l.etcdDir(), l.pidsDir(), l.pkiDir()} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	for _, d := range []string{l.logsDir(), l.pidsDir(), l.pkiDir(), filepath.Join(l.dir, "kwok")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

func (l layout) writeKubeconfig(p pki) error {
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		return b, nil
	}
	ca, err := read(p.CACert)
	if err != nil {
		return err
	}
	cert, err := read(p.AdminCert)
	if err != nil {
		return err
	}
	key, err := read(p.AdminKey)
	if err != nil {
		return err
	}
	const name = "hyperbatch-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + loopback(l.ports().APIServer), CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "admin"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, l.kubeconfig()); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", l.kubeconfig(), err)
	}
	return nil
}

// writeSchedulerConfig copies docs/scheduler-config.yaml with clientConnection.kubeconfig pointing at
// this cluster. The copy is written as JSON, which is valid YAML for kube-scheduler.
func (l layout) writeSchedulerConfig() error {
	src := filepath.Join(l.root, "docs", "scheduler-config.yaml")
	raw, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	js, err := yaml.ToJSON(raw)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", src, err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(js, &cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", src, err)
	}
	if cfg == nil {
		return fmt.Errorf("%s is empty: it must hold a KubeSchedulerConfiguration", src)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = l.kubeconfig()
	cfg["clientConnection"] = conn
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding scheduler configuration: %w", err)
	}
	if err := os.WriteFile(l.schedulerConfig(), append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", l.schedulerConfig(), err)
	}
	return nil
}

func (l layout) writeState(s state) error {
	b, _ := json.Marshal(s)
	if err := os.WriteFile(l.stateFile(), b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", l.stateFile(), err)
	}
	return nil
}

func (l layout) readState() (state, bool) {
	b, err := os.ReadFile(l.stateFile())
	if err != nil {
		return state{}, false
	}
	var s state
	if json.Unmarshal(b, &s) != nil || s.PortBase == 0 {
		return state{}, false
	}
	return s, true
}

// installCRDs runs hack/crds.sh (upstream CRDs into _output/crds/) if present, applies every CRD under
// _output/crds/ and config/crd/ with bin/kubectl and waits until all are Established.
func (l layout) installCRDs(ctx context.Context) error {
	t := time.Now()
	script := filepath.Join(l.root, "hack", "crds.sh")
	if _, err := os.Stat(script); err == nil {
		logPath := l.logFile("crds")
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
	args := []string{"--kubeconfig=" + l.kubeconfig(), "apply", "--server-side", "--force-conflicts",
		"--field-manager=hyperbatch-localcluster"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	logPath := l.logFile("kubectl-apply-crds")
	if err := l.runLogged(ctx, logPath, kubectl, args...); err != nil {
		return fmt.Errorf("applying CRDs failed (%w).\n%s", err, logTail(logPath))
	}
	if err := l.waitCRDsEstablished(ctx, files, 90*time.Second); err != nil {
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

func (l layout) printUsage() {
	kc := l.kubeconfig()
	fmt.Printf(`
Local cluster is running (API server https://%s).
  export KUBECONFIG=%s
  %s get nodes
  %s get hypernodes
  logs:  %s/
  stop:  make down
`, loopback(l.ports().APIServer), kc, l.rel(filepath.Join(l.bin, "kubectl")), l.rel(filepath.Join(l.bin, "kubectl")), l.rel(l.logsDir()))
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

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
