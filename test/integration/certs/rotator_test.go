package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hyperbatch/hyperbatch/certs"
)

// realRecorder sends Events to the apiserver, as the manager's recorder does.
func realRecorder(t *testing.T) record.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "hyperbatch-cert-rotator"})
}

// assertPublished checks the Secret's certificates are on disk and in every webhook entry, and that
// the serving certificate verifies against that bundle for its DNS names and 127.0.0.1.
func assertPublished(t *testing.T, dir string, cfg certs.Config, now time.Time) state {
	t.Helper()
	st := readState(t, cfg.SecretName)
	for i, b := range caBundles(t, cfg) {
		if !bytes.Equal(b, st.secret.Data[certs.CACertKey]) {
			t.Fatalf("webhook entry %d has a caBundle different from the Secret's ca.crt", i)
		}
	}
	for _, k := range []string{certs.CACertKey, certs.TLSCertKey, certs.TLSKeyKey} {
		got, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil || !bytes.Equal(got, st.secret.Data[k]) {
			t.Fatalf("%s in %s differs from the Secret (%v)", k, dir, err)
		}
	}
	if err := certs.Verify(st.serving, st.bundle, now, append(cfg.Default().DNSNames, "127.0.0.1")...); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitForChange polls the Secret until cond holds and the files and webhook entries follow it.
func waitForChange(t *testing.T, dir string, cfg certs.Config, fc *clocktesting.FakeClock, what string, cond func(state) bool) state {
	t.Helper()
	eventually(t, what, func() (bool, error) {
		st := readState(t, cfg.SecretName)
		if !cond(st) {
			return false, nil
		}
		for _, b := range caBundles(t, cfg) {
			if !bytes.Equal(b, st.secret.Data[certs.CACertKey]) {
				return false, nil
			}
		}
		onDisk, err := os.ReadFile(filepath.Join(dir, certs.TLSCertKey))
		return err == nil && bytes.Equal(onDisk, st.secret.Data[certs.TLSCertKey]), err
	})
	return assertPublished(t, dir, cfg, fc.Now())
}

func sameSerial(a, b *x509.Certificate) bool { return a.SerialNumber.Cmp(b.SerialNumber) == 0 }

// TestRotatorLifecycle runs one rotator on a fake clock through creation, caBundle repair, a serving
// renewal and a full CA rotation, checking the Secret, the cert dir and every webhook entry each time.
func TestRotatorLifecycle(t *testing.T) {
	const prefix = "lifecycle"
	createWebhookConfigs(t, prefix)
	dir := t.TempDir()
	fc := clocktesting.NewFakeClock(time.Now())
	cfg := testConfig(prefix, dir)
	r, err := certs.New(cfg, certs.WithClient(k8s), certs.WithClock(fc), certs.WithEventRecorder(realRecorder(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Checker()(nil); err == nil {
		t.Fatal("readiness passed before the first sync")
	}
	startRotator(t, r)

	// 1. Created, written, injected.
	s0 := assertPublished(t, dir, cfg, fc.Now())
	if s0.secret.Type != corev1.SecretTypeTLS || len(s0.bundle) != 1 || !s0.bundle[0].IsCA {
		t.Fatalf("Secret type %s with %d CA(s)", s0.secret.Type, len(s0.bundle))
	}
	if err := r.Checker()(nil); err != nil {
		t.Fatal(err)
	}
	assertGauge(t, cfg, "serving", s0.serving)
	assertGauge(t, cfg, "ca", s0.bundle[0])

	// 2. Someone blanks a caBundle: the watch restores it (the fake clock is stopped, so no timer can).
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: prefix + "-validating"}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[1].ClientConfig.CABundle = []byte("overwritten by a helm upgrade")
	if err := k8s.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	eventually(t, "caBundle restored", func() (bool, error) {
		for _, b := range caBundles(t, cfg) {
			if !bytes.Equal(b, s0.secret.Data[certs.CACertKey]) {
				return false, nil
			}
		}
		return true, nil
	})

	// 3. Past the serving renewal point: a new serving cert (new serial) from the same CA.
	fc.SetTime(certs.RenewAt(s0.serving, 1.0/3, time.Hour).Add(time.Minute))
	s1 := waitForChange(t, dir, cfg, fc, "serving renewal", func(st state) bool { return !sameSerial(st.serving, s0.serving) })
	if !bytes.Equal(s1.secret.Data[certs.CACertKey], s0.secret.Data[certs.CACertKey]) {
		t.Fatal("a serving renewal changed the CA bundle")
	}
	assertGauge(t, cfg, "serving", s1.serving)

	// 4. CA rotation, step 1: the new CA joins the bundle; the serving cert stays.
	fc.SetTime(certs.RenewAt(s0.bundle[0], 1.0/3, time.Hour).Add(time.Minute))
	s2 := waitForChange(t, dir, cfg, fc, "CA rotation step 1", func(st state) bool { return len(st.bundle) == 2 })
	if !s2.bundle[1].Equal(s0.bundle[0]) || !sameSerial(s2.serving, s1.serving) {
		t.Fatal("step 1 must add the new CA in front of the old one and keep the serving cert")
	}
	// Step 2: after CAOverlap the serving cert comes from the new CA; the old CA is still trusted.
	fc.Step(cfg.CAOverlap)
	s3 := waitForChange(t, dir, cfg, fc, "CA rotation step 2", func(st state) bool { return !sameSerial(st.serving, s2.serving) })
	if len(s3.bundle) != 2 || s3.serving.CheckSignatureFrom(s3.bundle[0]) != nil {
		t.Fatal("step 2 must issue from the new CA and keep both CAs")
	}
	if err := certs.Verify(s2.serving, s3.bundle, fc.Now()); err != nil {
		t.Fatalf("a replica still serving the step-1 cert would be rejected: %v", err)
	}
	// Step 3: after another CAOverlap the old CA leaves.
	fc.Step(cfg.CAOverlap)
	s4 := waitForChange(t, dir, cfg, fc, "CA rotation step 3", func(st state) bool { return len(st.bundle) == 1 })
	if !s4.bundle[0].Equal(s3.bundle[0]) || !sameSerial(s4.serving, s3.serving) {
		t.Fatal("step 3 must only drop the old CA")
	}
	assertGauge(t, cfg, "ca", s4.bundle[0])

	assertEvents(t, cfg.SecretName, certs.ReasonCACreated, certs.ReasonServingCertIssued, certs.ReasonServingCertRotated, certs.ReasonCARotated, certs.ReasonCABundlePruned)
}

func assertGauge(t *testing.T, cfg certs.Config, kind string, c *x509.Certificate) {
	t.Helper()
	eventually(t, "expiry gauge "+kind, func() (bool, error) {
		families, err := metrics.Registry.Gather()
		if err != nil {
			return false, err
		}
		for _, f := range families {
			if f.GetName() != "hyperbatch_webhook_cert_expiry_timestamp_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["secret"] == namespace+"/"+cfg.SecretName && labels["cert"] == kind {
					return int64(m.GetGauge().GetValue()) == c.NotAfter.Unix(), nil
				}
			}
		}
		return false, nil
	})
}

func assertEvents(t *testing.T, secret string, reasons ...string) {
	t.Helper()
	eventually(t, "Events on the Secret", func() (bool, error) {
		list := &corev1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Secret" && e.InvolvedObject.Name == secret {
				seen[e.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestRotatorKeepsUnrelatedWebhookFields(t *testing.T) {
	const prefix = "fields"
	createWebhookConfigs(t, prefix)
	before := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: prefix + "-mutating"}, before); err != nil {
		t.Fatal(err)
	}
	r, err := certs.New(testConfig(prefix, t.TempDir()), certs.WithClient(k8s))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: prefix + "-mutating"}, after); err != nil {
		t.Fatal(err)
	}
	for i := range after.Webhooks {
		if len(after.Webhooks[i].ClientConfig.CABundle) == 0 {
			t.Fatalf("entry %d has no caBundle", i)
		}
		after.Webhooks[i].ClientConfig.CABundle = nil
	}
	// Everything but caBundle is as before.
	if !equality.Semantic.DeepEqual(before.Webhooks, after.Webhooks) {
		t.Fatalf("the patch changed more than caBundle:\nbefore %+v\nafter  %+v", before.Webhooks, after.Webhooks)
	}
}
