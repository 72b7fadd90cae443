// Package framework starts a real control plane (etcd + kube-apiserver from the project's bin/, via
// controller-runtime's envtest) with hyperbatch's CRD and the upstream Volcano, Karmada and JobSet CRDs
// installed, and hands tests a client. `make test` builds the binaries and gathers the CRDs first.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// RequiredKinds are the kinds every integration test may rely on; Start fails when one is not served.
var RequiredKinds = []schema.GroupVersionKind{
	{Group: "hyperbatch.dev", Version: "v1alpha1", Kind: "WorkloadPolicy"},
	{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"},
	{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"},
	{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "Queue"},
	{Group: "topology.volcano.sh", Version: "v1alpha1", Kind: "HyperNode"},
	{Group: "training.volcano.sh", Version: "v1alpha1", Kind: "HyperJob"},
	{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "PropagationPolicy"},
	{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"},
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// Options tune Start.
type Options struct {
	// CRDDirs replaces the default CRD directories (ours and the upstream ones).
	CRDDirs []string
	// WebhookInstall, when set, registers webhook configurations with the apiserver (see envtest).
	WebhookInstall *envtest.WebhookInstallOptions
	// FeatureGates are kube-apiserver feature gates (--feature-gates), for instance
	// {"MutatingAdmissionPolicy": true}.
	FeatureGates map[string]bool
	// RuntimeConfig enables or disables API versions (--runtime-config), for instance
	// {"admissionregistration.k8s.io/v1beta1": "true"}.
	RuntimeConfig map[string]string
}

// apiServerFlags sets the feature gates and runtime-config of o on the API server's arguments.
func (o Options) apiServerFlags(te *envtest.Environment) {
	if len(o.FeatureGates) == 0 && len(o.RuntimeConfig) == 0 {
		return
	}
	args := te.ControlPlane.GetAPIServer().Configure()
	if len(o.FeatureGates) > 0 {
		var gates []string
		for k, v := range o.FeatureGates {
			gates = append(gates, fmt.Sprintf("%s=%t", k, v))
		}
		sort.Strings(gates)
		args.Set("feature-gates", strings.Join(gates, ","))
	}
	if len(o.RuntimeConfig) > 0 {
		var rc []string
		for k, v := range o.RuntimeConfig {
			rc = append(rc, k+"="+v)
		}
		sort.Strings(rc)
		args.Set("runtime-config", strings.Join(rc, ","))
	}
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// DefaultCRDDirs are our CRD directory and the upstream ones `make crds` writes.
func DefaultCRDDirs() []string {
	root := RepoRoot()
	dirs := []string{filepath.Join(root, "config", "crd")}
	for _, d := range []string{"volcano", "karmada", "jobset", "training"} {
		dirs = append(dirs, filepath.Join(root, "_output", "crds", d))
	}
	return dirs
}

// AssetsDir is where etcd, kube-apiserver and kubectl are: KUBEBUILDER_ASSETS, or the project's bin/.
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Start brings up etcd and kube-apiserver, installs the CRDs and checks every required kind is served.
func Start(opts Options) (*Env, error) {
	assets := AssetsDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s is missing from %s: run 'make test-tools' (or set KUBEBUILDER_ASSETS): %w", b, assets, err)
		}
	}
	dirs := opts.CRDDirs
	if dirs == nil {
		dirs = DefaultCRDDirs()
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("CRD directory %s is missing: run 'make crds' (upstream CRDs) or 'make generate' (ours): %w", d, err)
		}
	}
	localproc.KeepInheritedFiles() // envtest's etcd and kube-apiserver inherit nothing of ours
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              dirs,
			ErrorIfPathMissing: true,
			MaxTime:            60 * time.Second,
		},
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if opts.WebhookInstall != nil {
		te.WebhookInstallOptions = *opts.WebhookInstall
	}
	opts.apiServerFlags(te)
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("starting envtest control plane (binaries from %s, CRDs from %v): %w", assets, dirs, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	e := &Env{Config: cfg, Client: c, env: te}
	if opts.CRDDirs == nil {
		if err := e.checkKinds(RequiredKinds); err != nil {
			_ = te.Stop()
			return nil, err
		}
	}
	return e, nil
}

// KubeAPIServerMinor is the minor version of AssetsDir()'s kube-apiserver, from its --version (which
// hack/tools.sh stamps), so a suite can choose version-dependent flags before starting it.
func KubeAPIServerMinor() (int, error) {
	bin := filepath.Join(AssetsDir(), "kube-apiserver")
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", bin, err)
	}
	// "Kubernetes v1.37.2"
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes")), "v%d.%d", &major, &minor); err != nil || major != 1 || minor == 0 {
		return 0, fmt.Errorf("%s --version printed %q, not a stamped v1.N version: rebuild it with hack/tools.sh", bin, strings.TrimSpace(string(out)))
	}
	return minor, nil
}

func (e *Env) checkKinds(kinds []schema.GroupVersionKind) error {
	var errs []error
	for _, gvk := range kinds {
		if _, err := e.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			errs = append(errs, fmt.Errorf("kind %s is not served (is its CRD in %v? run 'make crds'): %w", gvk, e.env.CRDInstallOptions.Paths, err))
		}
	}
	return errors.Join(errs...)
}

// WebhookOptions returns the webhook install options envtest filled in (host, port, cert dir).
func (e *Env) WebhookOptions() envtest.WebhookInstallOptions { return e.env.WebhookInstallOptions }

// Stop shuts the control plane down.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	return e.env.Stop()
}

// Context returns a context bounded for one test step.
func Context(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
