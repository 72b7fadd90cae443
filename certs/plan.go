package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

// Event reasons (also logged) for the changes a sync makes.
const (
	ReasonCACreated          = "CACreated"
	ReasonCARecovered        = "CARecovered"
	ReasonCARotated          = "CARotated"
	ReasonServingCertIssued  = "ServingCertIssued"
	ReasonServingCertRotated = "ServingCertRotated"
	ReasonCABundlePruned     = "CABundlePruned"
	ReasonCABundleInjected   = "CABundleInjected"
)

// change is one thing a plan does to the Secret.
type change struct {
	Reason  string
	Message string
}

// plan is the desired Secret content computed from the current one at a given time.
type plan struct {
	Data    map[string][]byte // ca.crt, ca.key, tls.crt, tls.key
	Changes []change
	// Next is the latest time the plan must be recomputed (a renewal or a CA-rotation step is due).
	Next    time.Time
	CA      *KeyPair            // the signing CA (the one ca.key belongs to)
	Serving *KeyPair            // the serving certificate
	Bundle  []*x509.Certificate // ca.crt: the signing CA first, then CAs kept for overlap
}

// recovery is what verifiers and webhook servers use right now, gathered when the Secret's CA is lost
// (the Secret was deleted, or ca.crt/ca.key are unreadable or do not match): the CA bundle the webhook
// configurations hold and this replica's cert dir has (PEM), and the serving pair in the cert dir.
type recovery struct {
	Bundle          []byte
	TLSCert, TLSKey []byte
}

// computePlan decides, from the Secret's current data, what it must hold at now. It is pure (apart
// from key generation) so rotation can be tested at exact time boundaries.
//
// When the Secret holds no usable CA, a new CA is made, and the trust in use is kept (rec): the
// unexpired CAs of rec.Bundle stay in the bundle next to the new CA, and the serving certificate in
// the cert dir is kept while it is valid. The recovery then ends like a CA rotation (steps 2 and 3
// below), so no verifier that still trusts only the old CA meets a certificate from the new one, and
// the old CAs leave only after the serving certificate has come from the new CA for CAOverlap.
//
// A CA rotation takes three syncs, CAOverlap apart, so that every verifier trusts a certificate before
// it is served: (1) a new CA becomes the signer and joins the bundle next to the old one while the old
// serving certificate stays; (2) the serving certificate is re-issued from the new CA; (3) the old CA
// leaves the bundle. A serving certificate that is invalid, lacks a wanted SAN, or would expire before
// step 2 is re-issued at once.
func computePlan(cfg Config, now time.Time, data map[string][]byte, rec recovery) (*plan, error) {
	p := &plan{Data: map[string][]byte{}}
	oldBundle, bundleErr := ParseCerts(data[CACertKey])
	if bundleErr != nil {
		oldBundle = nil
	}
	ca, caProblem := findSigner(oldBundle, data[CAKeyKey], bundleErr)
	switch {
	case ca == nil:
		reason := ReasonCACreated
		kept := trustedCAs(now, oldBundle, rec.Bundle)
		if len(kept) > 0 {
			reason = ReasonCARecovered
			caProblem += fmt.Sprintf("; keeping the %d CA(s) verifiers trust now in %s until the serving certificate has come from the new CA for %s", len(kept), CACertKey, cfg.CAOverlap)
			oldBundle = kept
			if _, err := ParseKeyPair(data[TLSCertKey], data[TLSKeyKey]); err != nil && len(rec.TLSCert) > 0 {
				data = map[string][]byte{TLSCertKey: rec.TLSCert, TLSKeyKey: rec.TLSKey}
			}
		}
		if err := p.newCA(cfg, now, reason, caProblem); err != nil {
			return nil, err
		}
	case NeedsRenewal(ca.Cert, now, cfg.RenewFraction, cfg.RenewBefore):
		if err := p.newCA(cfg, now, ReasonCARotated, fmt.Sprintf("CA serial %x expires %s", ca.Cert.SerialNumber, ca.Cert.NotAfter.Format(time.RFC3339))); err != nil {
			return nil, err
		}
	default:
		p.CA = ca
		p.Data[CAKeyKey] = data[CAKeyKey]
		p.Next = RenewAt(ca.Cert, cfg.RenewFraction, cfg.RenewBefore)
	}
	bundle := dedupe(append([]*x509.Certificate{p.CA.Cert}, oldBundle...))

	if err := p.serving(cfg, now, data, bundle); err != nil {
		return nil, err
	}
	p.prune(cfg, now, bundle)
	if sameCerts(p.Bundle, oldBundle) {
		p.Data[CACertKey] = data[CACertKey]
	} else {
		p.Data[CACertKey] = EncodeBundle(p.Bundle)
	}
	return p, nil
}

// trustedCAs returns the unexpired CA certificates of bundle and of the PEM bundle extra (unreadable
// blocks are skipped: this is a best-effort salvage), without duplicates.
func trustedCAs(now time.Time, bundle []*x509.Certificate, extra []byte) []*x509.Certificate {
	all := append([]*x509.Certificate(nil), bundle...)
	for len(extra) > 0 {
		var b *pem.Block
		b, extra = pem.Decode(extra)
		if b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			all = append(all, c)
		}
	}
	var out []*x509.Certificate
	for _, c := range dedupe(all) {
		if c.IsCA && validAt(c, now) {
			out = append(out, c)
		}
	}
	return out
}

// hasSigner reports whether the Secret's ca.crt and ca.key hold a usable CA.
func hasSigner(bundle []*x509.Certificate, caKey []byte, bundleErr error) bool {
	ca, _ := findSigner(bundle, caKey, bundleErr)
	return ca != nil
}

// findSigner returns the CA in bundle that caKey belongs to, or nil and why not.
func findSigner(bundle []*x509.Certificate, caKey []byte, bundleErr error) (*KeyPair, string) {
	if bundleErr != nil {
		return nil, fmt.Sprintf("%s is unreadable: %v", CACertKey, bundleErr)
	}
	if len(caKey) == 0 || len(bundle) == 0 {
		return nil, "the Secret holds no CA"
	}
	key, err := ParseKey(caKey)
	if err != nil {
		return nil, fmt.Sprintf("%s is unreadable: %v", CAKeyKey, err)
	}
	for _, c := range bundle {
		if c.IsCA && samePublicKey(c.PublicKey, key.Public()) {
			return &KeyPair{Cert: c, Key: key}, ""
		}
	}
	return nil, fmt.Sprintf("%s matches no CA certificate in %s", CAKeyKey, CACertKey)
}

func (p *plan) newCA(cfg Config, now time.Time, reason, why string) error {
	ca, err := NewCA("hyperbatch-webhook-ca", now, cfg.CAValidity)
	if err != nil {
		return err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	p.CA = ca
	p.Data[CAKeyKey] = keyPEM
	p.Next = RenewAt(ca.Cert, cfg.RenewFraction, cfg.RenewBefore)
	p.Changes = append(p.Changes, change{reason, fmt.Sprintf("new CA serial %x valid until %s (%s)", ca.Cert.SerialNumber, ca.Cert.NotAfter.Format(time.RFC3339), why)})
	return nil
}

// serving keeps the current serving certificate or issues a new one from the signing CA.
func (p *plan) serving(cfg Config, now time.Time, data map[string][]byte, bundle []*x509.Certificate) error {
	cur, err := ParseKeyPair(data[TLSCertKey], data[TLSKeyKey])
	reason, why := ReasonServingCertRotated, ""
	switch {
	case err != nil:
		reason, why = ReasonServingCertIssued, fmt.Sprintf("no usable serving certificate: %v", err)
	case !validAt(cur.Cert, now):
		why = fmt.Sprintf("serial %x is outside its validity %s..%s", cur.Cert.SerialNumber, cur.Cert.NotBefore.Format(time.RFC3339), cur.Cert.NotAfter.Format(time.RFC3339))
	case !sansCover(cur.Cert, cfg):
		why = fmt.Sprintf("serial %x has SANs %v %v, want %v %v", cur.Cert.SerialNumber, cur.Cert.DNSNames, cur.Cert.IPAddresses, cfg.DNSNames, cfg.IPAddresses)
	case Verify(cur.Cert, bundle, now) != nil:
		why = fmt.Sprintf("serial %x is not signed by a CA in the bundle", cur.Cert.SerialNumber)
	case cur.Cert.CheckSignatureFrom(p.CA.Cert) != nil:
		// Signed by an older CA still in the bundle: switch once the new CA has had CAOverlap to spread.
		switchAt := issuedAt(p.CA.Cert).Add(cfg.CAOverlap)
		if now.Before(switchAt) && cur.Cert.NotAfter.After(switchAt) {
			p.keepServing(data, cur)
			p.Next = earliest(p.Next, switchAt)
			return nil
		}
		why = fmt.Sprintf("serial %x is signed by the previous CA; switching to CA serial %x", cur.Cert.SerialNumber, p.CA.Cert.SerialNumber)
	case !now.Before(RenewAt(cur.Cert, cfg.RenewFraction, cfg.RenewBefore)):
		why = fmt.Sprintf("serial %x expires %s", cur.Cert.SerialNumber, cur.Cert.NotAfter.Format(time.RFC3339))
	case cur.Cert.NotAfter.Sub(issuedAt(cur.Cert)) > cfg.CertValidity:
		// CertValidity was shortened: the certificate's own lifetime (not the clock) decides, so
		// replicas whose clocks differ never re-issue in turn.
		why = fmt.Sprintf("serial %x was issued for %s, longer than the configured validity %s", cur.Cert.SerialNumber, cur.Cert.NotAfter.Sub(issuedAt(cur.Cert)), cfg.CertValidity)
	default:
		p.keepServing(data, cur)
		p.Next = earliest(p.Next, RenewAt(cur.Cert, cfg.RenewFraction, cfg.RenewBefore))
		return nil
	}
	kp, err := NewServingCert(p.CA, cfg.DNSNames, cfg.IPAddresses, now, cfg.CertValidity)
	if err != nil {
		return err
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	p.Serving = kp
	p.Data[TLSCertKey] = kp.CertPEM()
	p.Data[TLSKeyKey] = keyPEM
	p.Next = earliest(p.Next, RenewAt(kp.Cert, cfg.RenewFraction, cfg.RenewBefore))
	p.Changes = append(p.Changes, change{reason, fmt.Sprintf("new serving certificate serial %x valid until %s for %v %v (%s)", kp.Cert.SerialNumber, kp.Cert.NotAfter.Format(time.RFC3339), kp.Cert.DNSNames, kp.Cert.IPAddresses, why)})
	return nil
}

func (p *plan) keepServing(data map[string][]byte, cur *KeyPair) {
	p.Serving = cur
	p.Data[TLSCertKey] = data[TLSCertKey]
	p.Data[TLSKeyKey] = data[TLSKeyKey]
}

// prune sets p.Bundle: the signing CA, plus every other unexpired CA until the serving certificate
// has been issued by the signing CA for CAOverlap.
func (p *plan) prune(cfg Config, now time.Time, bundle []*x509.Certificate) {
	p.Bundle = []*x509.Certificate{p.CA.Cert}
	onSigner := p.Serving.Cert.CheckSignatureFrom(p.CA.Cert) == nil
	dropAt := issuedAt(p.Serving.Cert).Add(cfg.CAOverlap)
	var dropped []string
	for _, c := range bundle[1:] {
		switch {
		case !c.IsCA || now.After(c.NotAfter):
			dropped = append(dropped, fmt.Sprintf("%x", c.SerialNumber))
		case onSigner && !now.Before(dropAt):
			dropped = append(dropped, fmt.Sprintf("%x", c.SerialNumber))
		default:
			p.Bundle = append(p.Bundle, c)
			p.Next = earliest(p.Next, c.NotAfter)
			if onSigner {
				p.Next = earliest(p.Next, dropAt)
			}
		}
	}
	if len(dropped) > 0 {
		p.Changes = append(p.Changes, change{ReasonCABundlePruned, fmt.Sprintf("removed CA serial(s) %v from %s; it holds %d CA(s)", dropped, CACertKey, len(p.Bundle))})
	}
}

// dataEqual reports whether two Secret data maps hold the same four keys.
func dataEqual(a, b map[string][]byte) bool {
	for _, k := range []string{CACertKey, CAKeyKey, TLSCertKey, TLSKeyKey} {
		if !bytes.Equal(a[k], b[k]) {
			return false
		}
	}
	return true
}
