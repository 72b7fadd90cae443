package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func webhookConfigs() []client.Object {
	url := "https://127.0.0.1:1/x"
	none := admissionregistrationv1.SideEffectClassNone
	return []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{
				{Name: "a.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
				{Name: "b.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: []byte("stale")}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{
				{Name: "c.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}},
			},
		},
	}
}

func TestRotatorSyncWithFakeClient(t *testing.T) {
	ctx := context.Background()
	placeholder := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data:       map[string][]byte{"keep-me": []byte("1")},
	}
	c := fakeClient(t, append(webhookConfigs(), placeholder)...)
	dir := t.TempDir()
	rec := record.NewFakeRecorder(100)
	r, err := New(Config{CertDir: dir, MutatingWebhookConfigurations: []string{"m"}, ValidatingWebhookConfigurations: []string{"v"}},
		WithClient(c), WithClock(clocktesting.NewFakeClock(t0)), WithEventRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Checker()(nil); err == nil {
		t.Fatal("ready before the first sync")
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Ready():
	default:
		t.Fatal("Ready not closed after a successful sync")
	}
	if err := r.Checker()(nil); err != nil {
		t.Fatal(err)
	}

	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(placeholder), secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["keep-me"]) != "1" {
		t.Fatal("unrelated Secret keys were dropped")
	}
	for _, k := range []string{CACertKey, TLSCertKey, TLSKeyKey} {
		onDisk, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil || !bytes.Equal(onDisk, secret.Data[k]) {
			t.Fatalf("%s on disk differs from the Secret (%v)", k, err)
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	_ = c.Get(ctx, client.ObjectKey{Name: "m"}, m)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	_ = c.Get(ctx, client.ObjectKey{Name: "v"}, v)
	for _, b := range [][]byte{m.Webhooks[0].ClientConfig.CABundle, m.Webhooks[1].ClientConfig.CABundle, v.Webhooks[0].ClientConfig.CABundle} {
		if !bytes.Equal(b, secret.Data[CACertKey]) {
			t.Fatal("caBundle not injected into every entry")
		}
	}
	if m.Webhooks[0].ClientConfig.URL == nil || *m.Webhooks[0].ClientConfig.URL != "https://127.0.0.1:1/x" {
		t.Fatal("the patch touched more than caBundle")
	}

	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	joined := strings.Join(events, "\n")
	for _, want := range []string{ReasonCACreated, ReasonServingCertIssued, ReasonCABundleInjected} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s event in %q", want, joined)
		}
	}

	// A second sync changes nothing.
	rv := secret.ResourceVersion
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Get(ctx, client.ObjectKeyFromObject(placeholder), secret)
	if secret.ResourceVersion != rv {
		t.Fatal("an idempotent sync wrote the Secret")
	}
}

func TestRotatorMissingWebhookConfiguration(t *testing.T) {
	r, err := New(Config{CertDir: t.TempDir(), ValidatingWebhookConfigurations: []string{"absent"}}, WithClient(fakeClient(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ValidatingWebhookConfiguration absent") {
		t.Fatalf("err = %v", err)
	}
	if cerr := r.Checker()(nil); cerr == nil || !strings.Contains(cerr.Error(), "absent") {
		t.Fatalf("readiness should fail with the cause, got %v", cerr)
	}
}

func TestCertManagerMode(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Mode: ModeCertManager, ValidatingWebhookConfigurations: []string{"v"}}
	c := fakeClient(t, webhookConfigs()...)
	r, err := New(cfg, WithClient(c))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "Secret hyperbatch-system/hyperbatch-webhook-tls does not exist") ||
		!strings.Contains(err.Error(), "Certificate hyperbatch-system/hyperbatch-webhook-cert") {
		t.Fatalf("err = %v", err)
	}

	// cert-manager issued the Secret, but cainjector has not filled caBundle yet.
	p := mustPlan(t, testConfig(), t0, nil)
	cl := clocktesting.NewFakeClock(t0)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultSecretNamespace, Name: DefaultSecretName},
		Data: map[string][]byte{CACertKey: p.Data[CACertKey], TLSCertKey: p.Data[TLSCertKey], TLSKeyKey: p.Data[TLSKeyKey]}}
	c = fakeClient(t, append(webhookConfigs(), secret)...)
	r, _ = New(cfg, WithClient(c), WithClock(cl))
	err = r.Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "cert-manager.io/inject-ca-from: hyperbatch-system/hyperbatch-webhook-cert") {
		t.Fatalf("err = %v", err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	_ = c.Get(ctx, client.ObjectKey{Name: "v"}, v)
	v.Webhooks[0].ClientConfig.CABundle = p.Data[CACertKey]
	if err := c.Update(ctx, v); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Checker()(nil); err != nil {
		t.Fatal(err)
	}
}
