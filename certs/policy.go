package certs

import (
	"crypto/x509"
	"time"
)

// RenewAt is when a certificate should be renewed: once the time left is below the larger of
// fraction × lifetime and before, where before is capped at half the lifetime (so a renewed
// certificate is never immediately due again).
func RenewAt(c *x509.Certificate, fraction float64, before time.Duration) time.Time {
	// The lifetime from issue, without NotBefore's backdate: with it, a certificate of 5 minutes or
	// less was due at once (half of validity+5m is more than the validity) and re-issued in a loop.
	lifetime := c.NotAfter.Sub(issuedAt(c))
	threshold := time.Duration(float64(lifetime) * fraction)
	if b := min(before, lifetime/2); b > threshold {
		threshold = b
	}
	return c.NotAfter.Add(-threshold)
}

// NeedsRenewal reports whether c is due for renewal (or outside its validity window) at now.
func NeedsRenewal(c *x509.Certificate, now time.Time, fraction float64, before time.Duration) bool {
	return !validAt(c, now) || !now.Before(RenewAt(c, fraction, before))
}

func validAt(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && !now.After(c.NotAfter)
}

// sansCover reports whether c covers every wanted DNS name and IP address. Extra SANs are accepted,
// so replicas running different configurations during a rollout (one adds a name) cannot re-issue
// the certificate back and forth: the one that needs a new name adds it, the other accepts it; a
// removed name disappears at the next renewal.
func sansCover(c *x509.Certificate, cfg Config) bool {
	have := map[string]bool{}
	for _, n := range c.DNSNames {
		have["dns:"+n] = true
	}
	for _, ip := range c.IPAddresses {
		have["ip:"+ip.String()] = true
	}
	for _, n := range cfg.DNSNames {
		if !have["dns:"+n] {
			return false
		}
	}
	for _, ip := range cfg.IPAddresses {
		if !have["ip:"+ip.String()] {
			return false
		}
	}
	return true
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
