package certs

import (
	"bytes"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

const day = 24 * time.Hour

func testConfig() Config {
	return Config{
		CertDir:      "unused",
		DNSNames:     []string{"hyperbatch-webhook.hyperbatch-system.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		CAValidity:   30 * day,
		CertValidity: 25 * day,
		RenewBefore:  time.Hour,
		CAOverlap:    time.Hour,
	}.Default()
}

func mustPlan(t *testing.T, cfg Config, now time.Time, data map[string][]byte, rec ...recovery) *plan {
	t.Helper()
	var r recovery
	if len(rec) > 0 {
		r = rec[0]
	}
	p, err := computePlan(cfg, now, data, r)
	if err != nil {
		t.Fatal(err)
	}
	if p.CA == nil || p.Serving == nil || len(p.Bundle) == 0 {
		t.Fatal("plan is incomplete")
	}
	// Invariants of every plan: the Secret data parses back to the plan, the signing CA leads the
	// bundle, and the serving certificate verifies against the bundle.
	bundle, err := ParseCerts(p.Data[CACertKey])
	if err != nil || !sameCerts(bundle, p.Bundle) || !bundle[0].Equal(p.CA.Cert) {
		t.Fatalf("ca.crt does not hold the plan's bundle (err %v)", err)
	}
	if _, err := ParseKeyPair(p.Data[CACertKey], p.Data[CAKeyKey]); err != nil {
		t.Fatalf("ca.key does not match the first CA: %v", err)
	}
	if _, err := ParseKeyPair(p.Data[TLSCertKey], p.Data[TLSKeyKey]); err != nil {
		t.Fatalf("tls pair: %v", err)
	}
	if err := Verify(p.Serving.Cert, p.Bundle, now, cfg.DNSNames...); err != nil {
		t.Fatal(err)
	}
	return p
}

func reasons(p *plan) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Reason)
	}
	return out
}

func expectReasons(t *testing.T, p *plan, want ...string) {
	t.Helper()
	got := reasons(p)
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("changes %v, want %v", got, want)
		}
	}
}

func expectUnchanged(t *testing.T, cfg Config, now time.Time, data map[string][]byte) {
	t.Helper()
	p := mustPlan(t, cfg, now, data)
	if len(p.Changes) > 0 || !dataEqual(p.Data, data) {
		t.Fatalf("at %v: unexpected changes %v", now, reasons(p))
	}
}

func TestPlanFromEmptyAndSteadyState(t *testing.T) {
	cfg := testConfig()
	for _, data := range []map[string][]byte{nil, {CACertKey: []byte("garbage"), TLSKeyKey: []byte("x")}} {
		p := mustPlan(t, cfg, t0, data)
		expectReasons(t, p, ReasonCACreated, ReasonServingCertIssued)
		if len(p.Bundle) != 1 {
			t.Fatalf("fresh bundle holds %d CAs", len(p.Bundle))
		}
		if want := RenewAt(p.Serving.Cert, cfg.RenewFraction, cfg.RenewBefore); !p.Next.Equal(want) {
			t.Fatalf("next check %v, want the serving renewal %v", p.Next, want)
		}
		expectUnchanged(t, cfg, t0.Add(time.Minute), p.Data)
	}
}

func TestPlanServingRenewalBoundary(t *testing.T) {
	cfg := testConfig()
	p := mustPlan(t, cfg, t0, nil)
	at := RenewAt(p.Serving.Cert, cfg.RenewFraction, cfg.RenewBefore)
	expectUnchanged(t, cfg, at.Add(-time.Nanosecond), p.Data)

	r := mustPlan(t, cfg, at, p.Data)
	expectReasons(t, r, ReasonServingCertRotated)
	if r.Serving.Cert.SerialNumber.Cmp(p.Serving.Cert.SerialNumber) == 0 {
		t.Fatal("serial did not change")
	}
	if !bytes.Equal(r.Data[CACertKey], p.Data[CACertKey]) || !bytes.Equal(r.Data[CAKeyKey], p.Data[CAKeyKey]) {
		t.Fatal("a serving renewal must not touch the CA")
	}
	if !r.Serving.Cert.NotAfter.Equal(p.CA.Cert.NotAfter) {
		t.Fatalf("renewed cert (%v) should be capped at the CA's expiry (%v)", r.Serving.Cert.NotAfter, p.CA.Cert.NotAfter)
	}
}

// TestPlanCARotation walks a CA rotation through its three steps and checks at each step that a
// server holding any certificate issued so far is trusted by the bundle clients have then.
func TestPlanCARotation(t *testing.T) {
	cfg := testConfig()
	p0 := mustPlan(t, cfg, t0, nil)
	ca1 := p0.CA.Cert
	// Renew the serving cert once on the way so it is still valid when the CA becomes due.
	p1 := mustPlan(t, cfg, t0.Add(17*day), p0.Data)
	expectReasons(t, p1, ReasonServingCertRotated)
	s1 := p1.Serving.Cert

	caDue := RenewAt(ca1, cfg.RenewFraction, cfg.RenewBefore)
	if !p1.Next.Equal(caDue) {
		t.Fatalf("next check %v, want the CA renewal %v", p1.Next, caDue)
	}
	expectUnchanged(t, cfg, caDue.Add(-time.Nanosecond), p1.Data)

	// Step 1: the new CA joins the bundle and signs from now on; the serving cert stays.
	p2 := mustPlan(t, cfg, caDue, p1.Data)
	expectReasons(t, p2, ReasonCARotated)
	ca2 := p2.CA.Cert
	if ca2.Equal(ca1) || !sameCerts(p2.Bundle, []*x509.Certificate{ca2, ca1}) {
		t.Fatal("bundle should be new CA + old CA")
	}
	if !bytes.Equal(p2.Data[TLSCertKey], p1.Data[TLSCertKey]) {
		t.Fatal("serving cert changed in step 1")
	}
	switchAt := caDue.Add(cfg.CAOverlap)
	if !p2.Next.Equal(switchAt) {
		t.Fatalf("next check %v, want %v", p2.Next, switchAt)
	}
	expectUnchanged(t, cfg, switchAt.Add(-time.Nanosecond), p2.Data)

	// Step 2: the serving cert is re-issued from the new CA; the old CA stays for old servers.
	p3 := mustPlan(t, cfg, switchAt, p2.Data)
	expectReasons(t, p3, ReasonServingCertRotated)
	if err := p3.Serving.Cert.CheckSignatureFrom(ca2); err != nil {
		t.Fatalf("step 2 cert not from the new CA: %v", err)
	}
	if !sameCerts(p3.Bundle, []*x509.Certificate{ca2, ca1}) {
		t.Fatal("old CA left the bundle too early")
	}
	if err := Verify(s1, p3.Bundle, switchAt); err != nil {
		t.Fatalf("a replica still serving the old cert would fail: %v", err)
	}
	dropAt := switchAt.Add(cfg.CAOverlap)
	if !p3.Next.Equal(dropAt) {
		t.Fatalf("next check %v, want %v", p3.Next, dropAt)
	}
	expectUnchanged(t, cfg, dropAt.Add(-time.Nanosecond), p3.Data)

	// Step 3: the old CA leaves.
	p4 := mustPlan(t, cfg, dropAt, p3.Data)
	expectReasons(t, p4, ReasonCABundlePruned)
	if !sameCerts(p4.Bundle, []*x509.Certificate{ca2}) || !bytes.Equal(p4.Data[TLSCertKey], p3.Data[TLSCertKey]) {
		t.Fatal("step 3 should only drop the old CA")
	}
	expectUnchanged(t, cfg, dropAt.Add(time.Hour), p4.Data)
}

func TestPlanReissuesAtOnce(t *testing.T) {
	cfg := testConfig()
	p := mustPlan(t, cfg, t0, nil)

	t.Run("SANs changed", func(t *testing.T) {
		c := cfg
		c.DNSNames = append([]string{"new.svc"}, cfg.DNSNames...)
		r := mustPlan(t, c, t0.Add(time.Minute), p.Data)
		expectReasons(t, r, ReasonServingCertRotated)
	})
	t.Run("key mismatch", func(t *testing.T) {
		data := copyData(p.Data)
		data[TLSKeyKey] = p.Data[CAKeyKey]
		r := mustPlan(t, cfg, t0.Add(time.Minute), data)
		expectReasons(t, r, ReasonServingCertIssued)
	})
	t.Run("expired", func(t *testing.T) {
		c := cfg
		c.CAValidity = 100 * day // so the CA is not due yet
		q := mustPlan(t, c, t0, nil)
		r := mustPlan(t, c, q.Serving.Cert.NotAfter.Add(time.Second), q.Data)
		expectReasons(t, r, ReasonServingCertRotated)
	})
	t.Run("would expire before the switch to a new CA", func(t *testing.T) {
		// CA due, and the serving cert ends within CAOverlap: no time to wait for step 2.
		at := p.Serving.Cert.NotAfter.Add(-cfg.CAOverlap / 2)
		r := mustPlan(t, cfg, at, p.Data)
		expectReasons(t, r, ReasonCARotated, ReasonServingCertRotated)
		if len(r.Bundle) != 2 {
			t.Fatalf("old CA must stay in the bundle, got %d CAs", len(r.Bundle))
		}
	})
	t.Run("validity shortened", func(t *testing.T) {
		c := cfg
		c.CertValidity = 3 * time.Minute
		r := mustPlan(t, c, t0.Add(time.Minute), p.Data)
		expectReasons(t, r, ReasonServingCertRotated)
		if got := r.Serving.Cert.NotAfter.Sub(issuedAt(r.Serving.Cert)); got != c.CertValidity {
			t.Fatalf("re-issued for %s, want %s", got, c.CertValidity)
		}
		// The new certificate is kept until its renewal, by replicas whose clocks differ too.
		expectUnchanged(t, c, t0.Add(time.Minute+10*time.Second), r.Data)
		expectUnchanged(t, c, t0.Add(time.Minute-10*time.Second), r.Data)
		// Lengthening the validity waits for the next renewal.
		expectUnchanged(t, cfg, t0.Add(time.Minute+10*time.Second), r.Data)
	})
	t.Run("CA key lost", func(t *testing.T) {
		data := copyData(p.Data)
		delete(data, CAKeyKey)
		r := mustPlan(t, cfg, t0.Add(time.Minute), data)
		expectReasons(t, r, ReasonCARecovered)
		if len(r.Bundle) != 2 || !bytes.Equal(r.Data[TLSCertKey], p.Data[TLSCertKey]) {
			t.Fatal("the old CA and serving cert should stay until the new CA has spread")
		}
	})
}

func TestPlanDropsExpiredCAs(t *testing.T) {
	cfg := testConfig()
	old := mustCA(t, t0.Add(-10*day), 5*day) // expired before t0
	p := mustPlan(t, cfg, t0, nil)
	data := copyData(p.Data)
	data[CACertKey] = EncodeBundle([]*x509.Certificate{p.CA.Cert, old.Cert, p.Serving.Cert})
	r := mustPlan(t, cfg, t0.Add(time.Minute), data)
	expectReasons(t, r, ReasonCABundlePruned)
	if !sameCerts(r.Bundle, []*x509.Certificate{p.CA.Cert}) {
		t.Fatalf("bundle holds %d certificates, want only the signing CA", len(r.Bundle))
	}
}

func copyData(d map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

func TestPlanKeepsCertWithExtraSANs(t *testing.T) {
	cfg := testConfig()
	wide := cfg
	wide.DNSNames = append([]string{"extra.svc"}, cfg.DNSNames...)
	p := mustPlan(t, wide, t0, nil)
	// A replica that does not want extra.svc accepts the certificate until its renewal...
	expectUnchanged(t, cfg, t0.Add(time.Minute), p.Data)
	// ...and then issues exactly its own SANs.
	r := mustPlan(t, cfg, RenewAt(p.Serving.Cert, cfg.RenewFraction, cfg.RenewBefore), p.Data)
	expectReasons(t, r, ReasonServingCertRotated)
	if len(r.Serving.Cert.DNSNames) != len(cfg.DNSNames) {
		t.Fatalf("renewed cert has %v, want %v", r.Serving.Cert.DNSNames, cfg.DNSNames)
	}
}

// A lost CA (Secret deleted, or ca.crt unreadable) is replaced with overlap: the CAs verifiers trust
// now (from the webhook configurations and the cert dir) stay in the bundle, the served certificate is
// kept until the new CA has spread, and the recovery ends like a CA rotation.
func TestPlanRecoversLostCA(t *testing.T) {
	cfg := testConfig()
	p := mustPlan(t, cfg, t0, nil)
	at := t0.Add(time.Minute)
	local := recovery{Bundle: p.Data[CACertKey], TLSCert: p.Data[TLSCertKey], TLSKey: p.Data[TLSKeyKey]}

	t.Run("Secret deleted, cert dir kept", func(t *testing.T) {
		r := mustPlan(t, cfg, at, nil, local)
		expectReasons(t, r, ReasonCARecovered)
		if len(r.Bundle) != 2 || !r.Bundle[1].Equal(p.CA.Cert) || r.CA.Cert.Equal(p.CA.Cert) {
			t.Fatalf("want the new CA first and the old one kept, got %d CAs", len(r.Bundle))
		}
		if !bytes.Equal(r.Data[TLSCertKey], p.Data[TLSCertKey]) || !bytes.Equal(r.Data[TLSKeyKey], p.Data[TLSKeyKey]) {
			t.Fatal("the served certificate must be kept until the new CA has spread")
		}
		// Then steps 2 and 3 of a CA rotation.
		switchAt := issuedAt(r.CA.Cert).Add(cfg.CAOverlap)
		expectUnchanged(t, cfg, switchAt.Add(-time.Second), r.Data)
		s2 := mustPlan(t, cfg, switchAt, r.Data)
		expectReasons(t, s2, ReasonServingCertRotated)
		if len(s2.Bundle) != 2 || s2.Serving.Cert.CheckSignatureFrom(r.CA.Cert) != nil {
			t.Fatal("step 2 must issue from the new CA and keep both CAs")
		}
		s3 := mustPlan(t, cfg, issuedAt(s2.Serving.Cert).Add(cfg.CAOverlap), s2.Data)
		expectReasons(t, s3, ReasonCABundlePruned)
		if len(s3.Bundle) != 1 || !s3.Bundle[0].Equal(r.CA.Cert) {
			t.Fatal("step 3 must leave only the new CA")
		}
	})
	t.Run("ca.crt corrupt", func(t *testing.T) {
		data := copyData(p.Data)
		data[CACertKey] = []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
		r := mustPlan(t, cfg, at, data, recovery{Bundle: p.Data[CACertKey]})
		expectReasons(t, r, ReasonCARecovered)
		if len(r.Bundle) != 2 || !bytes.Equal(r.Data[TLSCertKey], p.Data[TLSCertKey]) {
			t.Fatal("the webhook configurations' CA and the Secret's serving cert must be kept")
		}
	})
	t.Run("Secret deleted, nothing on disk", func(t *testing.T) {
		r := mustPlan(t, cfg, at, nil, recovery{Bundle: p.Data[CACertKey]})
		expectReasons(t, r, ReasonCARecovered, ReasonServingCertIssued)
		if len(r.Bundle) != 2 || !r.Bundle[1].Equal(p.CA.Cert) {
			t.Fatal("the CA the webhook configurations trust must stay while other replicas still serve its certificate")
		}
		s3 := mustPlan(t, cfg, issuedAt(r.Serving.Cert).Add(cfg.CAOverlap), r.Data)
		expectReasons(t, s3, ReasonCABundlePruned)
	})
	t.Run("nothing to recover", func(t *testing.T) {
		expired := mustCA(t, t0.Add(-10*day), 5*day)
		junk := append(EncodeBundle([]*x509.Certificate{expired.Cert, p.Serving.Cert}), []byte("junk")...)
		r := mustPlan(t, cfg, at, nil, recovery{Bundle: junk})
		expectReasons(t, r, ReasonCACreated, ReasonServingCertIssued)
		if len(r.Bundle) != 1 {
			t.Fatalf("expired CAs and leaf certificates are not trust anchors; bundle holds %d", len(r.Bundle))
		}
	})
}
