// Package certs tests the webhook certificate rotator against a real kube-apiserver and etcd
// (controller-runtime envtest; binaries from KUBEBUILDER_ASSETS or the repository's bin/). No CRDs are
// needed: the rotator only touches Secrets, Events and webhook configurations.
package certs

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hyperbatch/hyperbatch/certs"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

const namespace = "hyperbatch-system"

var (
	restConfig *rest.Config
	k8s        client.WithWatch
)

func assetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "bin")
}

func TestMain(m *testing.M) {
	framework.SetupLogs(framework.QuietErrors)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets := assetsDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing from %s: run 'hack/tools.sh etcd kube-apiserver' or set KUBEBUILDER_ASSETS: %v\n", b, assets, err)
			return 1
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting kube-apiserver and etcd from %s: %v\n", assets, err)
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		}
	}()
	restConfig = cfg
	k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating client: %v\n", err)
		return 1
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		fmt.Fprintf(os.Stderr, "creating namespace %s: %v\n", namespace, err)
		return 1
	}
	return m.Run()
}

// testConfig is a Config with short lifetimes so a fake clock reaches every rotation step:
// CA 30 days (due after ~20 days), serving 25 days (due after ~16.7 days), 1h CA overlap.
func testConfig(prefix, certDir string) certs.Config {
	return certs.Config{
		SecretNamespace:                 namespace,
		SecretName:                      prefix + "-tls",
		CertDir:                         certDir,
		IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
		MutatingWebhookConfigurations:   []string{prefix + "-mutating"},
		ValidatingWebhookConfigurations: []string{prefix + "-validating"},
		CAValidity:                      30 * 24 * time.Hour,
		CertValidity:                    25 * 24 * time.Hour,
		RenewBefore:                     time.Hour,
		CAOverlap:                       time.Hour,
	}
}

// createWebhookConfigs creates <prefix>-mutating and <prefix>-validating with two entries each. They
// can never block anything: failurePolicy Ignore, a URL nothing listens on, and rules for a resource
// that does not exist.
func createWebhookConfigs(t *testing.T, prefix string) {
	t.Helper()
	ctx := context.Background()
	url := "https://127.0.0.1:1/x"
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"never.hyperbatch.test"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	cc := admissionregistrationv1.WebhookClientConfig{URL: &url}
	ignore, none := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-mutating"}}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-validating"}}
	for _, n := range []string{"one", "two"} {
		m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{Name: n + ".m.hyperbatch.test", ClientConfig: cc, Rules: rules,
			FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](1)})
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: n + ".v.hyperbatch.test", ClientConfig: cc, Rules: rules,
			FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](1)})
	}
	for _, o := range []client.Object{m, v} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{m, v} {
			_ = k8s.Delete(context.Background(), o)
		}
	})
}

// caBundles returns every entry's caBundle of cfg's mutating and validating configurations.
func caBundles(t *testing.T, cfg certs.Config) [][]byte {
	t.Helper()
	ctx := context.Background()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: cfg.MutatingWebhookConfigurations[0]}, m); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: cfg.ValidatingWebhookConfigurations[0]}, v); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, h := range m.Webhooks {
		out = append(out, h.ClientConfig.CABundle)
	}
	for _, h := range v.Webhooks {
		out = append(out, h.ClientConfig.CABundle)
	}
	return out
}

func getSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		t.Fatalf("reading Secret %s: %v", name, err)
	}
	return s
}

// state is the parsed certificates of a Secret.
type state struct {
	secret  *corev1.Secret
	bundle  []*x509.Certificate
	serving *x509.Certificate
}

func readState(t *testing.T, name string) state {
	t.Helper()
	st, err := tryReadState(name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tryReadState reads and parses the Secret; it fails while the Secret is missing, holds no CA or an
// unreadable one.
func tryReadState(name string) (state, error) {
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return state{}, fmt.Errorf("reading Secret %s: %w", name, err)
	}
	bundle, err := certs.ParseCerts(s.Data[certs.CACertKey])
	if err == nil && len(bundle) == 0 {
		err = fmt.Errorf("Secret %s holds no CA", name)
	}
	if err != nil {
		return state{}, err
	}
	kp, err := certs.ParseKeyPair(s.Data[certs.TLSCertKey], s.Data[certs.TLSKeyKey])
	if err != nil {
		return state{}, err
	}
	return state{secret: s, bundle: bundle, serving: kp.Cert}, nil
}

// eventually polls cond every 100ms for up to 30s.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// startRotator runs r until the test ends and waits for it to be ready.
func startRotator(t *testing.T, r *certs.Rotator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rotator stopped with %v", err)
		}
	})
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("rotator exited early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("rotator not ready after 30s: %v", r.Checker()(nil))
	}
}
