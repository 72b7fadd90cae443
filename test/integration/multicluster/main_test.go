// Package multicluster tests against a real Karmada v1.16 control plane (test/integration/framework/karmadaplane) and
// two real member clusters (test/integration/framework/membercluster: kube-apiserver, kwok nodes with nvidia.com/gpu,
// Volcano's webhooks, controllers and scheduler), joined in Push mode by our own code. Nothing is
// patched by hand: propagation, execution, status and deletion are Karmada's and Volcano's.
package multicluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperbatch/hyperbatch/internal/karmadainterpreter"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/karmadaplane"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
)

var (
	plane   *karmadaplane.Plane
	members = map[string]*membercluster.Member{}
)

// The members: different accelerator capacity, so a summary that mixed them up would show, and
// different HyperNode trees (member1: a leaf per node; member2: one leaf of 2 nodes; each member a
// spine above its leaves), so a placement inside one HyperNode can be checked. The auto split tests
// count free accelerators per leaf of these trees (docs/multicluster.md, "How `auto` decides").
var memberNodes = map[string][]membercluster.Node{
	"member1": {{Name: "m1-gpu-0", GPUs: 8, Leaf: "m1-leaf-0"}, {Name: "m1-gpu-1", GPUs: 8, Leaf: "m1-leaf-1"}, {Name: "m1-gpu-2", GPUs: 8, Leaf: "m1-leaf-2"}},
	"member2": {{Name: "m2-gpu-0", GPUs: 4, Leaf: "m2-leaf-0"}, {Name: "m2-gpu-1", GPUs: 4, Leaf: "m2-leaf-0"}},
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "hyperbatch-multicluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keep := os.Getenv("MULTICLUSTER_KEEP_LOGS") != ""
	code := 1
	defer func() {
		if code != 0 || keep {
			fmt.Fprintf(os.Stderr, "multicluster: logs kept in %s\n", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	begin := time.Now()
	// The plane serves the resource templates' CRDs (Volcano's) and the HyperJob controller's own kinds:
	// HyperJob (the Volcano training CRD hack/crds.sh generates) and WorkloadPolicy (config/crd).
	root := framework.RepoRoot()
	crdDirs := []string{filepath.Join(root, "_output", "crds", "volcano"), filepath.Join(root, "_output", "crds", "training"), filepath.Join(root, "config", "crd")}
	if plane, err = karmadaplane.Start(ctx, karmadaplane.Options{Dir: filepath.Join(dir, "karmada"), TemplateCRDDirs: crdDirs}); err != nil {
		fmt.Fprintf(os.Stderr, "Karmada plane did not start: %v\n", err)
		return 1
	}
	// The plane and the members stop concurrently: each kube-apiserver takes seconds to shut down.
	stoppers := []func() error{plane.Stop}
	defer func() { stopAll(stoppers) }()
	// What the control-plane manager installs at its start (the tests run its controllers in
	// process): the retention that keeps Karmada's updates of a member's Volcano Job acceptable to
	// Volcano's webhook, so the children's status keeps coming back.
	if other, err := karmadainterpreter.Ensure(ctx, plane.Client); err != nil || other != "" {
		fmt.Fprintf(os.Stderr, "installing the Volcano Job retention: %v %s\n", err, other)
		return 1
	}
	names := sortedNames()
	for _, name := range names {
		// Each member runs hyperbatch's manager (member mode) and hyperbatch-scheduler besides Volcano.
		mc, err := membercluster.Start(ctx, membercluster.Options{Name: name, Dir: filepath.Join(dir, name), Nodes: memberNodes[name], Hyperbatch: true})
		if err != nil {
			fmt.Fprintf(os.Stderr, "member %s did not start: %v\n", name, err)
			return 1
		}
		members[name] = mc
		stoppers = append(stoppers, mc.Stop)
	}
	for _, name := range names {
		if err := plane.Join(ctx, name, members[name].Config); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for _, name := range names {
		if _, err := plane.WaitClusterReady(ctx, name, 2*time.Minute); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n%s", err, plane.LogTails(30))
			return 1
		}
	}
	joined := time.Since(begin)
	code = m.Run()
	report(joined)
	return code
}

// stopAll runs every stop function concurrently and reports errors and how long it took.
func stopAll(stops []func() error) {
	begin := time.Now()
	errs := make(chan error, len(stops))
	for _, stop := range stops {
		go func() { errs <- stop() }()
	}
	for range stops {
		if err := <-errs; err != nil {
			fmt.Fprintf(os.Stderr, "multicluster: stopping: %v\n", err)
		}
	}
	fmt.Fprintf(os.Stderr, "multicluster: plane and members stopped in %s\n", time.Since(begin).Round(100*time.Millisecond))
}

func sortedNames() []string {
	var out []string
	for n := range memberNodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// report prints the startup times and every process's peak RSS and CPU time (docs/multicluster.md
// quotes them).
func report(joined time.Duration) {
	w := tabwriter.NewWriter(os.Stderr, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintf(w, "multicluster: plane ready in %s, plane + 2 members up and joined (Clusters Ready) in %s\n",
		plane.StartupTime.Round(100*time.Millisecond), joined.Round(100*time.Millisecond))
	var steps []string
	for _, s := range plane.Ready {
		steps = append(steps, fmt.Sprintf("%s %s", s.Name, s.Took.Round(100*time.Millisecond)))
	}
	_, _ = fmt.Fprintf(w, "multicluster: plane steps: %s\n", strings.Join(steps, ", "))
	for _, name := range sortedNames() {
		steps = steps[:0]
		for _, s := range members[name].Ready {
			steps = append(steps, fmt.Sprintf("%s %s", s.Name, s.Took.Round(100*time.Millisecond)))
		}
		_, _ = fmt.Fprintf(w, "multicluster: %s up in %s: %s\n", name, members[name].StartupTime.Round(100*time.Millisecond), strings.Join(steps, ", "))
	}
	_, _ = fmt.Fprintln(w, "where\tprocess\tpeak RSS MiB\tCPU s")
	row := func(where string, p *framework.Process) {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%.0f\t%.1f\n", where, p.Name, float64(p.PeakRSSKiB())/1024, p.CPUSeconds())
	}
	for _, p := range plane.Processes {
		row("karmada", p)
	}
	for _, name := range sortedNames() {
		for _, p := range members[name].Processes {
			row(name, p)
		}
	}
	_ = w.Flush()
}
