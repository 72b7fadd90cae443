package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Keys are ECDSA P-256: every Kubernetes apiserver and Go TLS stack accepts them, and generating one
// takes microseconds (an RSA-2048 key takes tens of milliseconds), which keeps rotation and tests cheap.
// Imported keys may also be RSA (PKCS#1/PKCS#8) or EC (SEC 1).

// backdate is subtracted from NotBefore so a verifier whose clock lags ours by up to this much still
// accepts a certificate issued a moment ago. issuedAt undoes it.
const backdate = 5 * time.Minute

// Secret data keys, as written by cert-manager and read by controller-runtime's webhook server.
const (
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
)

// KeyPair is a parsed certificate with its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CertPEM returns the certificate in PEM form.
func (kp *KeyPair) CertPEM() []byte { return encodeCert(kp.Cert) }

// KeyPEM returns the private key as a PKCS#8 "PRIVATE KEY" PEM block.
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		return nil, fmt.Errorf("encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// NewCA creates a self-signed CA valid from now (minus a small backdate) for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	tmpl, err := template(commonName, now, validity, key.Public())
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, key.Public(), key, key)
}

// NewServingCert issues a TLS server certificate for dnsNames and ips, signed by ca. It is valid for
// validity, but never beyond the CA's own NotAfter.
func NewServingCert(ca *KeyPair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("issuing serving certificate: no CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	cn := "hyperbatch-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl, err := template(cn, now, validity, key.Public())
	if err != nil {
		return nil, err
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.DNSNames = append([]string(nil), dnsNames...)
	tmpl.IPAddresses = append([]net.IP(nil), ips...)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.BasicConstraintsValid = true
	return sign(tmpl, ca.Cert, key.Public(), ca.Key, key)
}

func template(cn string, now time.Time, validity time.Duration, pub crypto.PublicKey) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	ski := sha256.Sum256(pubDER)
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"hyperbatch"}},
		NotBefore:    now.Add(-backdate).UTC(),
		NotAfter:     now.Add(validity).UTC(),
		SubjectKeyId: ski[:20],
	}, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer, key crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// issuedAt is when a certificate of ours was issued (NotBefore without the backdate).
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(backdate) }

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// ParseCerts returns every CERTIFICATE block in data, in order; other blocks are skipped.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseKey parses the first private key PEM block (PKCS#8, SEC 1 or PKCS#1).
func ParseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no private key PEM block")
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", b.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("private key of type %T cannot sign", k)
		}
		return s, nil
	}
}

// ParseKeyPair parses a PEM certificate (the first block is the leaf) and its PEM private key and
// checks they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate PEM block")
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !samePublicKey(certs[0].PublicKey, key.Public()) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: key}, nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	// Every standard-library public key type (ECDSA, RSA, Ed25519) has Equal.
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// Verify checks that leaf chains to one of the CAs in bundle at time now and covers every DNS name.
func Verify(leaf *x509.Certificate, bundle []*x509.Certificate, now time.Time, dnsNames ...string) error {
	pool := x509.NewCertPool()
	for _, c := range bundle {
		pool.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("verifying %q against the CA bundle: %w", leaf.Subject.CommonName, err)
	}
	for _, n := range dnsNames {
		if err := leaf.VerifyHostname(n); err != nil {
			return fmt.Errorf("verifying %q: %w", leaf.Subject.CommonName, err)
		}
	}
	return nil
}
