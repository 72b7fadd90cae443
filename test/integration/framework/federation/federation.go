// Package federation starts a Karmada plane (karmadaplane) and member clusters (membercluster) and
// joins every member in Push mode, and runs hyperbatch's HyperJob controller against the plane:
// what a multi-cluster suite or benchmark needs. It only composes the two packages' Start, Join and
// Stop and the controller's setup.
package federation

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/karmadaplane"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/membercluster"
)

// Options say what to start.
type Options struct {
	// Dir receives karmada/ and one directory per member (logs, certificates); required.
	Dir string
	// Members are the member clusters by name, with their kwok nodes.
	Members map[string][]membercluster.Node
	// ReadyTimeout bounds the wait for each Cluster to become Ready; default 2 minutes.
	ReadyTimeout time.Duration
}

// Federation is a running plane with its joined members.
type Federation struct {
	Plane   *karmadaplane.Plane
	Members map[string]*membercluster.Member
	// Joined is the wall time from Start until every Cluster was Ready.
	Joined time.Duration
	stops  []func() error
}

// Start brings up the plane (serving Volcano's, the training and hyperbatch's CRDs as resource
// templates) and the members, joins them and waits until every Cluster is Ready. On error,
// whatever started is stopped.
func Start(ctx context.Context, o Options) (f *Federation, err error) {
	begin := time.Now()
	if o.Dir == "" || len(o.Members) == 0 {
		return nil, errors.New("federation: Options needs Dir and at least one member")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	root := framework.RepoRoot()
	crdDirs := []string{filepath.Join(root, "_output", "crds", "volcano"), filepath.Join(root, "_output", "crds", "training"), filepath.Join(root, "config", "crd")}
	plane, err := karmadaplane.Start(ctx, karmadaplane.Options{Dir: filepath.Join(o.Dir, "karmada"), TemplateCRDDirs: crdDirs})
	if err != nil {
		return nil, fmt.Errorf("karmada plane: %w", err)
	}
	f = &Federation{Plane: plane, Members: map[string]*membercluster.Member{}, stops: []func() error{plane.Stop}}
	defer func() {
		if err != nil {
			_ = f.Stop()
			f = nil
		}
	}()
	names := sortedNames(o.Members)
	for _, name := range names {
		m, err := membercluster.Start(ctx, membercluster.Options{Name: name, Dir: filepath.Join(o.Dir, name), Nodes: o.Members[name]})
		if err != nil {
			return f, fmt.Errorf("member %s: %w", name, err)
		}
		f.Members[name] = m
		f.stops = append(f.stops, m.Stop)
	}
	for _, name := range names {
		if err := plane.Join(ctx, name, f.Members[name].Config); err != nil {
			return f, err
		}
	}
	for _, name := range names {
		if _, err := plane.WaitClusterReady(ctx, name, o.ReadyTimeout); err != nil {
			return f, fmt.Errorf("%w\n%s", err, plane.LogTails(30))
		}
	}
	f.Joined = time.Since(begin)
	return f, nil
}

// sortedNames are the member names in order.
func sortedNames(members map[string][]membercluster.Node) []string {
	out := make([]string, 0, len(members))
	for n := range members {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Processes are the plane's and every member's processes, each with where it runs ("karmada" or
// the member's name).
func (f *Federation) Processes() []Located {
	var out []Located
	for _, p := range f.Plane.Processes {
		out = append(out, Located{Where: "karmada", Process: p})
	}
	names := make([]string, 0, len(f.Members))
	for n := range f.Members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, p := range f.Members[n].Processes {
			out = append(out, Located{Where: n, Process: p})
		}
	}
	return out
}

// Located is a process and where it runs.
type Located struct {
	Where   string
	Process *framework.Process
}

// Stop stops the plane and the members concurrently (each kube-apiserver takes seconds).
func (f *Federation) Stop() error {
	errs := make(chan error, len(f.stops))
	for _, stop := range f.stops {
		go func() { errs <- stop() }()
	}
	var all []error
	for range f.stops {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// StartHyperJobController runs a controller-runtime manager with only hyperbatch's HyperJob
// controller against the plane, configured from the plane's kubeconfig file (as the manager is in
// its control-plane mode), its cache limited to namespace (and cluster-scoped objects). qps is the
// client's rest.Config.QPS (-1: no client-side limit, what cmd/manager runs with when the
// kubeconfig sets none). The returned function stops it and reports the manager's error.
func StartHyperJobController(plane *karmadaplane.Plane, namespace string, qps float32, burst int, extra ...func(ctrl.Manager) error) (func() error, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", plane.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the plane's kubeconfig %s: %w", plane.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := hyperjob.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the HyperJob controller: %w", err)
	}
	for _, setup := range extra {
		if err := setup(mgr); err != nil {
			return nil, fmt.Errorf("setting up a controller beside the HyperJob controller: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}
