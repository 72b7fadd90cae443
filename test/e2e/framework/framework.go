// Package framework is the e2e suite's small framework: it finds or starts the clusters the suite
// runs against, hands out clients by cluster name, and holds the waits and namespaces the feature
// files share.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// Primary is the name of the cluster every suite has: the local cluster's first (`local`), or the
// current context of a kubeconfig given from outside.
const Primary = localproc.LegacyClusterName

// LocalPortBase is where the suite's private local cluster listens by default (17443..), apart from
// `make run`'s. HYPERBATCH_E2E_PORT_BASE moves it, so two checkouts on one machine can run the suite at once.
const LocalPortBase = 17443

// KubeconfigEnv names the variable that points the suite at a running cluster (see Setup).
const KubeconfigEnv = "HYPERBATCH_E2E_KUBECONFIG"

// PortBaseEnv names the variable that moves the local cluster's ports (see LocalPortBase).
const PortBaseEnv = "HYPERBATCH_E2E_PORT_BASE"

// localPortBase is LocalPortBase, or the port PortBaseEnv names.
func localPortBase() (int, error) {
	v := os.Getenv(PortBaseEnv)
	if v == "" {
		return LocalPortBase, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1024 || p > 65000 {
		return 0, fmt.Errorf("%s=%q: want a port number between 1024 and 65000 (unset it for the default %d)", PortBaseEnv, v, LocalPortBase)
	}
	return p, nil
}

// Cluster is one cluster the suite reaches: its kubeconfig context and clients.
type Cluster struct {
	Name       string
	Kubeconfig string // the suite's kubeconfig (every cluster's context)
	Context    string
	Config     *rest.Config
	// Client watches too: tests that must not miss short-lived objects record them from a watch
	// opened before they create anything.
	Client client.WithWatch
}

// Suite is the set of clusters of one run.
type Suite struct {
	Kubeconfig string
	clusters   map[string]*Cluster
	stop       func()
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BinDir holds the project-built binaries: HYPERBATCH_BIN, or the project's bin/.
func BinDir() string {
	if b := os.Getenv("HYPERBATCH_BIN"); b != "" {
		return b
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Setup connects to the clusters of kubeconfig, or, when it is empty, starts a private local cluster
// (hack/localcluster in _output/e2e on ports from LocalPortBase) and connects to the clusters of its
// state file. Stop stops what Setup started.
func Setup(kubeconfig string) (*Suite, error) {
	nodes, err := ParseNodes(os.Getenv(NodesEnv))
	if err != nil {
		return nil, err
	}
	install, err := ParseInstall(os.Getenv(InstallEnv))
	if err != nil {
		return nil, err
	}
	s := &Suite{Kubeconfig: kubeconfig, stop: func() {}}
	names := map[string]string{} // cluster name -> context
	if kubeconfig == "" {
		if !nodes.Simulated() {
			return nil, fmt.Errorf("%s=%s: the suite's own local cluster has kwok nodes only; set %s to a cluster with real nodes", NodesEnv, nodes.Kind, KubeconfigEnv)
		}
		if install != ProcessInstall {
			return nil, fmt.Errorf("%s=%s: the suite's own local cluster runs hyperbatch as host processes; set %s to a cluster started with `make run REAL_NODES=2 CHART=1`", InstallEnv, install, KubeconfigEnv)
		}
		dir := filepath.Join(RepoRoot(), "_output", "e2e")
		stop, err := startLocalCluster(dir)
		if err != nil {
			return nil, err
		}
		s.stop, s.Kubeconfig = stop, localproc.KubeconfigFile(dir)
		st, ok := localproc.ReadState(dir)
		if !ok {
			stop()
			return nil, fmt.Errorf("hack/localcluster wrote no state file in %s", dir)
		}
		for _, cl := range st.Clusters {
			names[cl.Name] = cl.Context()
		}
	} else {
		raw, err := clientcmd.LoadFromFile(kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
		}
		// The current context is the primary cluster; contexts named like a local cluster's
		// (hyperbatch-<name>) are reachable by that name too.
		names[Primary] = raw.CurrentContext
		for ctx := range raw.Contexts {
			if n, ok := strings.CutPrefix(ctx, "hyperbatch-"); ok && n != Primary {
				names[n] = ctx
			}
		}
	}
	s.clusters = map[string]*Cluster{}
	for name, context := range names {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: s.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("cluster %s (context %s of %s): %w", name, context, s.Kubeconfig, err)
		}
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("client for cluster %s: %w", name, err)
		}
		s.clusters[name] = &Cluster{Name: name, Kubeconfig: s.Kubeconfig, Context: context, Config: cfg, Client: c}
	}
	if s.clusters[Primary] == nil {
		s.Stop()
		return nil, fmt.Errorf("no cluster %q among %v", Primary, s.Names())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := checkNodes(ctx, s.clusters[Primary].Client, nodes); err != nil {
		s.Stop()
		return nil, err
	}
	if err := checkInstall(ctx, s.clusters[Primary].Client, install); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Cluster returns the cluster of that name; it panics on an unknown name (a suite bug).
func (s *Suite) Cluster(name string) *Cluster {
	cl, ok := s.clusters[name]
	if !ok {
		panic(fmt.Sprintf("e2e: no cluster %q (have %v)", name, s.Names()))
	}
	return cl
}

// Names lists the suite's clusters.
func (s *Suite) Names() []string {
	var out []string
	for n := range s.clusters {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Stop stops the clusters Setup started (nothing for a kubeconfig from outside).
func (s *Suite) Stop() { s.stop() }

// startLocalCluster runs `go run ./hack/localcluster up` for a private cluster in dir and returns a
// function that tears it down.
func startLocalCluster(dir string) (func(), error) {
	root := RepoRoot()
	run := func(args ...string) error {
		cmd := exec.Command("go", append([]string{"run", "./hack/localcluster"}, args...)...)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	down := func() {
		if err := run("down", "--dir", dir); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the e2e local cluster: %v\n", err)
		}
	}
	down() // leftovers of an interrupted run
	portBase, err := localPortBase()
	if err != nil {
		return nil, err
	}
	if err := run("up", "--dir", dir, "--bin", BinDir(), "--port-base", fmt.Sprint(portBase), "--nodes", "16", "--no-demo", "--discover"); err != nil {
		down()
		return nil, fmt.Errorf("hack/localcluster up (logs in %s/logs): %w", dir, err)
	}
	return down, nil
}

// Kubectl runs the project-built kubectl (never one from PATH) against the cluster.
func (cl *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(BinDir(), "kubectl"), append([]string{"--kubeconfig", cl.Kubeconfig, "--context", cl.Context}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Namespace creates a fresh namespace (e2e-<random>) in the cluster, deleted when the test ends.
func (cl *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	if err := cl.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// WaitDeleted waits until obj is gone from the cluster.
func (cl *Cluster) WaitDeleted(t testing.TB, obj client.Object, what string, timeout time.Duration) {
	t.Helper()
	Poll(t, timeout, what, func(ctx context.Context) (bool, error) {
		err := cl.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// Poll checks cond every 250ms until it holds, and fails the test after timeout.
func Poll(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}
