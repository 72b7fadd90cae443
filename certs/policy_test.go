package certs

import (
	"crypto/x509"
	"testing"
	"time"
)

// certValid is a certificate issued at from for lifetime, backdated as ours are (NewServingCert).
func certValid(from time.Time, lifetime time.Duration) *x509.Certificate {
	return &x509.Certificate{NotBefore: from.Add(-backdate), NotAfter: from.Add(lifetime)}
}

func TestRenewAt(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		fraction float64
		before   time.Duration
		want     time.Duration // renewal point after NotBefore
	}{
		{"1y cert: 1/3 of lifetime dominates 30d", 365 * day, 1.0 / 3, 30 * day, 365*day - time.Duration(float64(365*day)*(1.0/3))},
		{"60d cert: 30d dominates 1/3 (20d)", 60 * day, 1.0 / 3, 30 * day, 30 * day},
		{"1h cert: 30d capped at half the lifetime", time.Hour, 1.0 / 3, 30 * day, 30 * time.Minute},
		{"no before", 90 * day, 0.5, 0, 45 * day},
		{"10y CA", 3650 * day, 1.0 / 3, 30 * day, 3650*day - time.Duration(float64(3650*day)*(1.0/3))},
		// Shorter than the 5-minute backdate: counted with it, this one was due the moment it was issued.
		{"3m cert: 30d capped at half the lifetime", 3 * time.Minute, 1.0 / 3, 30 * day, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := certValid(t0, tc.lifetime)
			at := RenewAt(c, tc.fraction, tc.before)
			if got := at.Sub(t0); got != tc.want {
				t.Fatalf("renew %v after issue, want %v", got, tc.want)
			}
			if NeedsRenewal(c, at.Add(-time.Nanosecond), tc.fraction, tc.before) {
				t.Fatal("due just before the renewal point")
			}
			if !NeedsRenewal(c, at, tc.fraction, tc.before) {
				t.Fatal("not due at the renewal point")
			}
			if !NeedsRenewal(c, c.NotBefore.Add(-time.Nanosecond), tc.fraction, tc.before) {
				t.Fatal("a not-yet-valid certificate must count as due")
			}
			if !NeedsRenewal(c, c.NotAfter.Add(time.Nanosecond), tc.fraction, tc.before) {
				t.Fatal("an expired certificate must be due")
			}
		})
	}
}

func TestSANsCover(t *testing.T) {
	ca := mustCA(t, t0, 24*time.Hour)
	cfg := Config{DNSNames: []string{"a.svc", "b.svc"}}
	cfg.IPAddresses = append(cfg.IPAddresses, []byte{127, 0, 0, 1})
	kp, err := NewServingCert(ca, []string{"b.svc", "a.svc"}, cfg.IPAddresses, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !sansCover(kp.Cert, cfg) {
		t.Fatal("same SANs in another order must be accepted")
	}
	cfg.DNSNames = []string{"a.svc"}
	cfg.IPAddresses = nil
	if !sansCover(kp.Cert, cfg) {
		t.Fatal("extra SANs must be accepted (no re-issue ping-pong between replicas)")
	}
	cfg.DNSNames = []string{"a.svc", "c.svc"}
	if sansCover(kp.Cert, cfg) {
		t.Fatal("a missing DNS name must be detected")
	}
	cfg.DNSNames = []string{"a.svc"}
	cfg.IPAddresses = append(cfg.IPAddresses, []byte{10, 0, 0, 1})
	if sansCover(kp.Cert, cfg) {
		t.Fatal("a missing IP must be detected")
	}
}
