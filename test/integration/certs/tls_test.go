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

// server is a real controller-runtime manager whose webhook server (gated by certs.WaitForCerts,
// certificates reloaded by its certwatcher from the rotator's cert dir) serves "ok" on 127.0.0.1.
type server struct {
	cfg    certs.Config
	fc     *clocktesting.FakeClock
	rot    *certs.Rotator
	url    string // the webhook endpoint
	readyz string // the manager's /readyz
}

// serve starts the manager until the test ends and waits for /readyz.
func serve(t *testing.T, prefix string, opts ...certs.Option) *server {
	t.Helper()
	createWebhookConfigs(t, prefix)
	dir := t.TempDir()
	s := &server{cfg: testConfig(prefix, dir), fc: clocktesting.NewFakeClock(time.Now())}
	rot, err := certs.New(s.cfg, append([]certs.Option{certs.WithClock(s.fc)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.rot = rot
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
	t.Cleanup(func() {
		cancel()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	s.url = fmt.Sprintf("https://127.0.0.1:%d/x", port)
	s.readyz = fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	// /readyz passes only once the certificates are out and the gated webhook server listens.
	eventually(t, "manager /readyz", func() (bool, error) {
		return s.ready()
	})
	return s
}

// ready reports whether the manager's /readyz passes.
func (s *server) ready() (bool, error) {
	resp, err := http.Get(s.readyz) //nolint:noctx // test
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// load calls the server in a bounded loop until stopped: each round one request trusting the caBundle
// currently in the webhook configuration, one trusting the bundle of the last step (an apiserver
// that has not caught up yet).
type load struct {
	s       *server
	lagging atomic.Pointer[x509.CertPool]
	ok      atomic.Int32
	failed  atomic.Int32
	mu      sync.Mutex
	first   error
	stopped chan struct{}
	done    sync.WaitGroup
}

func startLoad(t *testing.T, s *server) *load {
	t.Helper()
	l := &load{s: s, stopped: make(chan struct{})}
	first, err := webhookBundle(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.lagging.Store(first)
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		for i := 0; i < 20000; i++ {
			select {
			case <-l.stopped:
				return
			default:
			}
			current, err := webhookBundle(s.cfg)
			if err == nil {
				_, err = call(s.url, current, s.fc.Now)
			}
			if err == nil {
				_, err = call(s.url, l.lagging.Load(), s.fc.Now)
			}
			if err != nil {
				l.failed.Add(1)
				l.mu.Lock()
				if l.first == nil {
					l.first = err
				}
				l.mu.Unlock()
			} else {
				l.ok.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return l
}

// step makes a change (advancing the clock, deleting the Secret...), waits until the Secret satisfies
// done and the server presents its serving certificate, lets 20 more rounds run, and then lets the
// lagging client catch up to the bundle of the finished step.
func (l *load) step(t *testing.T, what string, change func(), done func(state) bool) state {
	t.Helper()
	change()
	var st state
	eventually(t, what, func() (bool, error) {
		var err error
		if st, err = tryReadState(l.s.cfg.SecretName); err != nil || !done(st) {
			return false, err
		}
		pool, err := webhookBundle(l.s.cfg)
		if err != nil {
			return false, err
		}
		served, err := call(l.s.url, pool, l.s.fc.Now)
		if err != nil {
			return false, err
		}
		return sameSerial(served, st.serving), nil
	})
	before := l.ok.Load()
	eventually(t, "requests after "+what, func() (bool, error) { return l.ok.Load() >= before+20, nil })
	pool, err := webhookBundle(l.s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.lagging.Store(pool)
	return st
}

// stop ends the loop and fails the test if any round failed.
func (l *load) stop(t *testing.T, what string) {
	t.Helper()
	close(l.stopped)
	l.done.Wait()
	if n := l.failed.Load(); n > 0 {
		t.Fatalf("%d of %d request rounds failed %s; first: %v", n, n+l.ok.Load(), what, l.first)
	}
	t.Logf("%d request rounds (2 handshakes each) succeeded %s", l.ok.Load(), what)
}

func (s *server) at(to time.Time) func() { return func() { s.fc.SetTime(to) } }

// TestWebhookServerAcrossRotations: the server is called throughout a serving renewal and a full CA
// rotation, and no request may fail.
func TestWebhookServerAcrossRotations(t *testing.T) {
	s := serve(t, "tls")
	cfg := s.cfg
	readErrors := counter(t, "certwatcher_read_certificate_errors_total")
	reads := counter(t, "certwatcher_read_certificate_total")
	l := startLoad(t, s)
	prev := readState(t, cfg.SecretName)
	s1 := l.step(t, "serving renewal", s.at(certs.RenewAt(prev.serving, 1.0/3, time.Hour).Add(time.Minute)),
		func(st state) bool { return !sameSerial(st.serving, prev.serving) })
	s2 := l.step(t, "CA rotation step 1", s.at(certs.RenewAt(prev.bundle[0], 1.0/3, time.Hour).Add(time.Minute)),
		func(st state) bool { return len(st.bundle) == 2 })
	s3 := l.step(t, "CA rotation step 2", s.at(s.fc.Now().Add(cfg.CAOverlap)),
		func(st state) bool { return !sameSerial(st.serving, s2.serving) })
	s4 := l.step(t, "CA rotation step 3", s.at(s.fc.Now().Add(cfg.CAOverlap)),
		func(st state) bool { return len(st.bundle) == 1 })
	l.stop(t, "across 4 rotation steps")

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
}

// TestWebhookServerSurvivesLostCA: the CA Secret is deleted, and later its CA is corrupted. Each time
// the rotator makes a new CA but keeps the CA the webhook configurations trust in the bundle and keeps
// serving the current certificate until the new CA has spread (then switches and prunes, as in a CA
// rotation). A client trusting only the old bundle is never refused.
func TestWebhookServerSurvivesLostCA(t *testing.T) {
	s := serve(t, "lostca")
	cfg := s.cfg
	l := startLoad(t, s)
	recoverFrom := func(what string, lose func()) {
		t.Helper()
		prev := readState(t, cfg.SecretName)
		r1 := l.step(t, what+": new CA joins, old CA and certificate kept", lose, func(st state) bool {
			return st.secret.UID != prev.secret.UID || !st.bundle[0].Equal(prev.bundle[0])
		})
		if len(r1.bundle) != 2 || !r1.bundle[1].Equal(prev.bundle[0]) || !sameSerial(r1.serving, prev.serving) {
			t.Fatalf("%s: want [new CA, old CA] and the old certificate kept, got %d CA(s), serving serial kept %v",
				what, len(r1.bundle), sameSerial(r1.serving, prev.serving))
		}
		r2 := l.step(t, what+": certificate from the new CA", s.at(s.fc.Now().Add(cfg.CAOverlap)),
			func(st state) bool { return !sameSerial(st.serving, prev.serving) })
		if len(r2.bundle) != 2 || r2.serving.CheckSignatureFrom(r1.bundle[0]) != nil {
			t.Fatalf("%s: the certificate must come from the new CA while both CAs are trusted", what)
		}
		l.step(t, what+": old CA pruned", s.at(s.fc.Now().Add(cfg.CAOverlap)),
			func(st state) bool { return len(st.bundle) == 1 && st.bundle[0].Equal(r1.bundle[0]) })
	}
	recoverFrom("Secret deleted", func() {
		if err := k8s.Delete(context.Background(), getSecret(t, cfg.SecretName)); err != nil {
			t.Fatal(err)
		}
	})
	recoverFrom("CA corrupted", func() {
		sec := getSecret(t, cfg.SecretName)
		sec.Data[certs.CACertKey] = []byte("not a certificate")
		sec.Data[certs.CAKeyKey] = []byte("not a key")
		if err := k8s.Update(context.Background(), sec); err != nil {
			t.Fatal(err)
		}
	})
	l.stop(t, "across two CA losses")
	assertEvents(t, cfg.SecretName, certs.ReasonCARecovered)
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
