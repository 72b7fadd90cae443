package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, now time.Time, validity time.Duration) *KeyPair {
	t.Helper()
	ca, err := NewCA("test-ca", now, validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestNewCAAndServingCert(t *testing.T) {
	ca := mustCA(t, t0, 10*365*24*time.Hour)
	if !ca.Cert.IsCA || !ca.Cert.BasicConstraintsValid || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("CA lacks CA constraints: isCA=%v usage=%v", ca.Cert.IsCA, ca.Cert.KeyUsage)
	}
	if _, ok := ca.Key.(*ecdsa.PrivateKey); !ok {
		t.Fatalf("CA key is %T, want ECDSA", ca.Key)
	}
	if err := ca.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("CA is not self-signed: %v", err)
	}

	dns := []string{"hyperbatch-webhook.hyperbatch-system.svc", "hyperbatch-webhook.hyperbatch-system.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	srv, err := NewServingCert(ca, dns, ips, t0, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(srv.Cert.DNSNames, dns) || len(srv.Cert.IPAddresses) != 1 || !srv.Cert.IPAddresses[0].Equal(ips[0]) {
		t.Fatalf("SANs = %v %v", srv.Cert.DNSNames, srv.Cert.IPAddresses)
	}
	if srv.Cert.IsCA {
		t.Fatal("serving certificate must not be a CA")
	}
	if got, want := srv.Cert.NotBefore, t0.Add(-backdate); !got.Equal(want) {
		t.Fatalf("NotBefore = %v, want %v", got, want)
	}
	if got, want := srv.Cert.NotAfter, t0.Add(365*24*time.Hour); !got.Equal(want) {
		t.Fatalf("NotAfter = %v, want %v", got, want)
	}
	if got := issuedAt(srv.Cert); !got.Equal(t0) {
		t.Fatalf("issuedAt = %v, want %v", got, t0)
	}
	// The chain verifies for every SAN, including the IP, at any time inside the validity.
	for _, at := range []time.Time{t0.Add(-time.Minute), t0, t0.Add(364 * 24 * time.Hour)} {
		if err := Verify(srv.Cert, []*x509.Certificate{ca.Cert}, at, append(dns, "127.0.0.1")...); err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
	}
	if err := Verify(srv.Cert, []*x509.Certificate{ca.Cert}, t0.Add(366*24*time.Hour)); err == nil {
		t.Fatal("expired serving certificate verified")
	}
	if err := Verify(srv.Cert, []*x509.Certificate{ca.Cert}, t0, "other.example"); err == nil {
		t.Fatal("verified for a name it does not cover")
	}
	other := mustCA(t, t0, time.Hour)
	if err := Verify(srv.Cert, []*x509.Certificate{other.Cert}, t0); err == nil {
		t.Fatal("verified against an unrelated CA")
	}
	// Same check with the standard library's verifier directly.
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := srv.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dns[0], CurrentTime: t0}); err != nil {
		t.Fatalf("x509.Verify: %v", err)
	}
}

func TestServingCertNeverOutlivesCA(t *testing.T) {
	ca := mustCA(t, t0, 48*time.Hour)
	srv, err := NewServingCert(ca, []string{"a"}, nil, t0.Add(24*time.Hour), 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("serving NotAfter %v, CA NotAfter %v", srv.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestPEMRoundTripAndKeyFormats(t *testing.T) {
	ca := mustCA(t, t0, time.Hour)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ParseKeyPair(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !kp.Cert.Equal(ca.Cert) {
		t.Fatal("round trip changed the certificate")
	}
	other := mustCA(t, t0, time.Hour)
	otherKey, _ := other.KeyPEM()
	if _, err := ParseKeyPair(ca.CertPEM(), otherKey); err == nil {
		t.Fatal("mismatched key accepted")
	}

	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(ecKey)
	if _, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})); err != nil {
		t.Fatalf("SEC 1 key: %v", err)
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // parsing test only
	pkcs1 := x509.MarshalPKCS1PrivateKey(rsaKey)
	withJunk := append(pem.EncodeToMemory(&pem.Block{Type: "JUNK", Bytes: []byte("x")}), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: pkcs1})...)
	if _, err := ParseKey(withJunk); err != nil {
		t.Fatalf("PKCS#1 key after another block: %v", err)
	}
	if _, err := ParseKey([]byte("nothing")); err == nil {
		t.Fatal("garbage parsed as a key")
	}
}
