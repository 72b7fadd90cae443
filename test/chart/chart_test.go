// Package chart tests the Helm chart charts/hyperbatch: it lints, renders in both certificate modes,
// agrees with the Go sources of truth (webhook configurations, scheduler profile), and every object
// it renders is accepted by a real kube-apiserver (server-side dry run).
package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/webhook"
)

const namespace = "hb-system"

func chartDir() string { return filepath.Join(framework.RepoRoot(), "charts", "hyperbatch") }

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(framework.AssetsDir(), "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm is missing from %s: run 'make test-tools' (hack/tools.sh helm)", framework.AssetsDir())
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// render runs helm template and decodes every document.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "hb", chartDir(), "--namespace", namespace, "--kube-version", "1.34.1"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding rendered chart: %v", err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) bool {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatalf("converting %s %s: %v", kind, name, err)
			}
			return true
		}
	}
	return false
}

func TestLint(t *testing.T) {
	if out, err := helm(t, "lint", chartDir(), "--kube-version", "1.34.1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestInvalidCertModeIsRefused(t *testing.T) {
	_, err := helm(t, "template", "hb", chartDir(), "--kube-version", "1.34.1", "--set", "certs.mode=vault")
	if err == nil || !strings.Contains(err.Error(), "certs.mode must be self or cert-manager") {
		t.Fatalf("want a clear refusal of certs.mode=vault, got %v", err)
	}
}

// The CRD shipped in the chart is the generated one.
func TestChartCRDIsGenerated(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "crd", "hyperbatch.dev_workloadpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir(), "crds", "hyperbatch.dev_workloadpolicies.yaml"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("charts/hyperbatch/crds is out of date with config/crd (err %v): run 'make generate'", err)
	}
}

func TestSelfCertMode(t *testing.T) {
	objs := render(t)
	var dep appsv1.Deployment
	if !find(t, objs, "Deployment", "hyperbatch-manager", &dep) {
		t.Fatal("no manager Deployment")
	}
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--cert-mode=self", "--webhook-cert-dir=/certs", "--leader-elect=true", "--enable-webhooks=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	if v := dep.Spec.Template.Spec.Volumes[0]; v.EmptyDir == nil {
		t.Errorf("self mode must give the rotator a writable emptyDir, got %+v", v)
	}
	for _, o := range objs {
		if o.GetKind() == "Certificate" || o.GetKind() == "Issuer" {
			t.Errorf("self mode renders cert-manager %s %s", o.GetKind(), o.GetName())
		}
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("self mode annotates %s %s for cainjector", o.GetKind(), o.GetName())
		}
	}
}

func TestCertManagerMode(t *testing.T) {
	objs := render(t, "certs.mode=cert-manager")
	var cert certmanagerv1.Certificate
	if !find(t, objs, "Certificate", "hyperbatch-webhook", &cert) {
		t.Fatal("no cert-manager Certificate rendered")
	}
	if cert.Spec.SecretName != "hyperbatch-webhook-tls" || cert.Spec.IssuerRef.Name != "hyperbatch-selfsigned" {
		t.Errorf("Certificate spec %+v", cert.Spec)
	}
	wantDNS := webhook.DefaultServiceName + "." + namespace + ".svc"
	if len(cert.Spec.DNSNames) == 0 || cert.Spec.DNSNames[0] != wantDNS {
		t.Errorf("Certificate dnsNames %v, want %s first", cert.Spec.DNSNames, wantDNS)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	find(t, objs, "MutatingWebhookConfiguration", webhook.MutatingConfigurationName, &mwc)
	if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/hyperbatch-webhook" {
		t.Errorf("inject-ca-from = %q", got)
	}
	var dep appsv1.Deployment
	find(t, objs, "Deployment", "hyperbatch-manager", &dep)
	if v := dep.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != cert.Spec.SecretName {
		t.Errorf("cert-manager mode must mount the Certificate's Secret, got %+v", v)
	}
	// With an existing issuer, no self-signed Issuer is created.
	objs = render(t, "certs.mode=cert-manager", "certs.certManager.issuerRef.name=corp-ca", "certs.certManager.issuerRef.kind=ClusterIssuer")
	find(t, objs, "Certificate", "hyperbatch-webhook", &cert)
	if cert.Spec.IssuerRef.Name != "corp-ca" || cert.Spec.IssuerRef.Kind != "ClusterIssuer" {
		t.Errorf("issuerRef %+v, want ClusterIssuer corp-ca", cert.Spec.IssuerRef)
	}
	var iss certmanagerv1.Issuer
	if find(t, objs, "Issuer", "hyperbatch-selfsigned", &iss) {
		t.Error("a self-signed Issuer is rendered although issuerRef is set")
	}
}

// The chart's webhook configurations are exactly webhook.Configurations in Service mode.
func TestWebhooksMatchGo(t *testing.T) {
	objs := render(t)
	wantM, wantV := webhook.Configurations(webhook.ConfigOptions{ServiceNamespace: namespace})
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	if !find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM) || !find(t, objs, "ValidatingWebhookConfiguration", wantV.Name, &gotV) {
		t.Fatal("webhook configurations missing from the chart")
	}
	if !equality.Semantic.DeepEqual(gotM.Webhooks, wantM.Webhooks) {
		t.Errorf("mutating webhooks differ from webhook.Configurations:\nchart %+v\ngo    %+v", gotM.Webhooks, wantM.Webhooks)
	}
	if !equality.Semantic.DeepEqual(gotV.Webhooks, wantV.Webhooks) {
		t.Errorf("validating webhooks differ from webhook.Configurations")
	}
	if objs := render(t, "manager.webhooks=false"); find(t, objs, "MutatingWebhookConfiguration", wantM.Name, &gotM) {
		t.Error("manager.webhooks=false still renders webhook configurations")
	}
}

// The scheduler profile in the chart is the documented one (docs/scheduler-config.yaml).
func TestSchedulerProfileMatchesDocs(t *testing.T) {
	objs := render(t)
	var cm corev1.ConfigMap
	if !find(t, objs, "ConfigMap", "hyperbatch-scheduler-config", &cm) {
		t.Fatal("no scheduler ConfigMap")
	}
	profiles := func(data []byte) any {
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m["profiles"]
	}
	docs, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := profiles([]byte(cm.Data["scheduler-config.yaml"])), profiles(docs); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("chart profile differs from docs/scheduler-config.yaml:\nchart %v\ndocs  %v", got, want)
	}
}

// A real kube-apiserver accepts every object the chart renders (server-side dry run, so schemas,
// RBAC rules and webhook configurations are all validated). cert-manager kinds need cert-manager's
// CRDs and are checked by TestCertManagerMode instead.
func TestRenderedObjectsAcceptedByAPIServer(t *testing.T) {
	env, err := framework.Start(framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range render(t) {
		if err := env.Client.Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("apiserver rejects %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d objects rendered", n)
	}
}
