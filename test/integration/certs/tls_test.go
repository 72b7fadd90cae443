package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/hyperbatch/hyperbatch/certs"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// webhookBundle is what the apiserver would trust: the caBundle of the validating configuration.
func webhookBundle(cfg certs.Config) (*x509.CertPool, error) {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: cfg.ValidatingWebhookConfigurations[0]}, v); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(v.Webhooks[0].ClientConfig.CABundle) {
		return nil, errors.New("caBundle holds no certificate")
	}
	return pool, nil
}

// call makes one request on a fresh connection (so every request does a full TLS handshake) to the
// webhook server at 127.0.0.1 (verified through the IP SAN) trusting pool, at the fake clock's time.
func call(url string, pool *x509.CertPool, now func() time.Time) (*x509.Certificate, error) {
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, Time: now, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return nil, fmt.Errorf("status %d body %q", resp.StatusCode, body)
	}
	return resp.TLS.PeerCertificates[0], nil
}

// TestWebhookServerAcrossRotations runs a real controller-runtime manager whose webhook server (gated
// by certs.WaitForCerts, certificates reloaded by its certwatcher from the rotator's cert dir) serves
// on 127.0.0.1. Two clients call it in a bounded loop throughout a serving renewal and a full CA
// rotation: one trusts the caBundle currently in the webhook configuration, the other a bundle one
// rotation step old (an apiserver that has not caught up yet). No request may fail.
func TestWebhookServerAcrossRotations(t *testing.T) {
	const prefix = "tls"
	createWebhookConfigs(t, prefix)
	dir := t.TempDir()
	fc := clocktesting.NewFakeClock(time.Now())
	cfg := testConfig(prefix, dir)
	rot, err := certs.New(cfg, certs.WithClock(fc))
	if err != nil {
		t.Fatal(err)
	}

	port, probePort := freePort(t), freePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	srv.Register("/x", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		WebhookServer:          certs.WaitForCerts(srv, rot.Ready()),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "127.0.0.1:" + strconv.Itoa(probePort),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddReadyzCheck("webhook-server", mgr.GetWebhookServer().StartedChecker()); err != nil {
		t.Fatal(err)
	}
	if err := rot.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// /readyz passes only once the certificates are out and the gated webhook server listens.
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	eventually(t, "manager /readyz", func() (bool, error) {
		resp, err := http.Get(readyz) //nolint:noctx // test
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	url := fmt.Sprintf("https://127.0.0.1:%d/x", port)
	var lagging atomic.Pointer[x509.CertPool] // bundle as of the previous step
	first, err := webhookBundle(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lagging.Store(first)

	readErrors := counter(t, "certwatcher_read_certificate_errors_total")
	reads := counter(t, "certwatcher_read_certificate_total")
	var ok, failed atomic.Int32
	var errMu sync.Mutex
	var firstErr error
	stop := make(chan struct{})
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		for i := 0; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			current, err := webhookBundle(cfg)
			if err == nil {
				_, err = call(url, current, fc.Now)
			}
			if err == nil {
				_, err = call(url, lagging.Load(), fc.Now)
			}
			if err != nil {
				failed.Add(1)
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			} else {
				ok.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// step advances the fake clock, waits until the server presents the Secret's (changed) serving
	// certificate, and then lets the lagging client catch up to the bundle of the finished step.
	prev := readState(t, cfg.SecretName)
	step := func(what string, to time.Time, done func(state) bool) state {
		t.Helper()
		fc.SetTime(to)
		var st state
		eventually(t, what, func() (bool, error) {
			st = readState(t, cfg.SecretName)
			if !done(st) {
				return false, nil
			}
			pool, err := webhookBundle(cfg)
			if err != nil {
				return false, err
			}
			served, err := call(url, pool, fc.Now)
			if err != nil {
				return false, err
			}
			return sameSerial(served, st.serving), nil
		})
		before := ok.Load()
		eventually(t, "requests after "+what, func() (bool, error) { return ok.Load() >= before+20, nil })
		pool, err := webhookBundle(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lagging.Store(pool)
		return st
	}

	s1 := step("serving renewal", certs.RenewAt(prev.serving, 1.0/3, time.Hour).Add(time.Minute),
		func(st state) bool { return !sameSerial(st.serving, prev.serving) })
	s2 := step("CA rotation step 1", certs.RenewAt(prev.bundle[0], 1.0/3, time.Hour).Add(time.Minute),
		func(st state) bool { return len(st.bundle) == 2 })
	s3 := step("CA rotation step 2", fc.Now().Add(cfg.CAOverlap),
		func(st state) bool { return !sameSerial(st.serving, s2.serving) })
	s4 := step("CA rotation step 3", fc.Now().Add(cfg.CAOverlap),
		func(st state) bool { return len(st.bundle) == 1 })

	close(stop)
	loop.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d request rounds failed across the rotations; first: %v", n, n+ok.Load(), firstErr)
	}
	// The cert dir switched each key/cert pair in one rename: the webhook server's certwatcher reloaded
	// (reads went up) without ever reading a broken or mismatched pair.
	if n := counter(t, "certwatcher_read_certificate_errors_total") - readErrors; n != 0 {
		t.Fatalf("certwatcher failed %v reads during the rotations", n)
	}
	if n := counter(t, "certwatcher_read_certificate_total") - reads; n < 4 {
		t.Fatalf("certwatcher read the certificate %v times during 4 rotation steps", n)
	}
	if s1.serving.CheckSignatureFrom(prev.bundle[0]) != nil || s3.serving.CheckSignatureFrom(s4.bundle[0]) != nil || s4.bundle[0].Equal(prev.bundle[0]) {
		t.Fatal("the run did not go through a serving renewal and a CA change")
	}
	t.Logf("%d request rounds (2 handshakes each) succeeded across 4 rotation steps", ok.Load())
}

// counter returns the value of an unlabelled counter in controller-runtime's metrics registry.
func counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
