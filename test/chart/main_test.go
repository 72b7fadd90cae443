package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// One control plane for the tests that need a kube-apiserver, started by the first of them.
var (
	envOnce sync.Once
	envErr  error
	shared  *framework.Env
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		}
	}
	os.Exit(code)
}

// certManagerCRDs is cert-manager's CRD directory in the Go module cache (cert-manager is a module
// dependency, pinned in go.mod), so cert-manager mode's objects are checked by the apiserver too.
func certManagerCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("locating github.com/cert-manager/cert-manager in the module cache (go mod download): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds"), nil
}

// env returns the shared control plane: our and the upstream CRDs, cert-manager's, and the
// namespace the chart is rendered into.
func env(t *testing.T) *framework.Env {
	t.Helper()
	envOnce.Do(func() {
		var cm string
		if cm, envErr = certManagerCRDs(); envErr != nil {
			return
		}
		if shared, envErr = framework.Start(framework.Options{CRDDirs: append(framework.DefaultCRDDirs(), cm)}); envErr != nil {
			return
		}
		envErr = shared.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return shared
}

// impersonating is the control plane's config impersonating the ServiceAccount sa of the chart's
// namespace, with the groups the apiserver gives a ServiceAccount token.
func impersonating(t *testing.T, sa string) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(env(t).Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// as returns a client impersonating the ServiceAccount sa.
func as(t *testing.T, sa string) client.Client {
	t.Helper()
	c, err := client.New(impersonating(t, sa), client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// apply creates or updates every object with server-side apply (dryRun: only validated).
func apply(t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		opts := []client.PatchOption{client.FieldOwner("helm"), client.ForceOwnership}
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		o = o.DeepCopy()
		//nolint:staticcheck // client.Apply with an unstructured object is plain server-side apply.
		if err := env(t).Client.Patch(ctx, o, client.Apply, opts...); err != nil {
			t.Errorf("apiserver rejects %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// kinds keeps the objects of the given kinds.
func kinds(objs []*unstructured.Unstructured, want ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range want {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}
