package karmadaplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certificate subjects the plane's components are configured with.
const (
	// AdminUser is the admin client certificate's subject: a member of system:masters, used by every
	// Karmada component and by the tests (Karmada's own deployment gives its components one such
	// karmada.config too).
	AdminUser  = "karmada-admin"
	adminGroup = "system:masters"
	// FrontProxyClientCN is the name kube-apiserver's aggregator presents to the aggregated apiserver
	// (--requestheader-allowed-names).
	FrontProxyClientCN = "front-proxy-client"
)

// certValidity is long enough for any test or local session.
const certValidity = 7 * 24 * time.Hour

// keyPair is a certificate and its key, both PEM.
type keyPair struct {
	cert, key []byte
	parsed    *x509.Certificate
	signer    *ecdsa.PrivateKey
}

// newCA creates a self-signed certificate authority.
func newCA(cn string) (*keyPair, error) {
	return issue(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
}

// servingCert issues a TLS server certificate for dnsNames and 127.0.0.1 signed by ca.
func (ca *keyPair) servingCert(cn string, dnsNames ...string) (*keyPair, error) {
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
}

// clientCert issues a TLS client certificate for user cn in groups, signed by ca.
func (ca *keyPair) clientCert(cn string, groups ...string) (*keyPair, error) {
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue signs tmpl with parent (self-signed when parent is nil) over a fresh ECDSA P-256 key.
func issue(parent *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key for %s: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.parsed, parent.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the key of %s: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		parsed: parsed, signer: key,
	}, nil
}

// write stores the pair as <dir>/<base>.crt and <dir>/<base>.key and returns both paths.
func (kp *keyPair) write(dir, base string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := os.WriteFile(certPath, kp.cert, 0o644); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, kp.key, 0o600); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", keyPath, err)
	}
	return certPath, keyPath, nil
}

// writeServiceAccountKey writes the RSA key pair kube-apiserver signs and verifies service-account
// tokens with (sa.key, sa.pub).
func writeServiceAccountKey(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generating the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("encoding the service-account public key: %w", err)
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", keyPath, err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", fmt.Errorf("writing %s: %w", pubPath, err)
	}
	return keyPath, pubPath, nil
}

// pki is every credential of one plane, written under Dir.
type pki struct {
	Dir string
	// CA signs the apiserver's serving certificate, the admin client certificate and the serving
	// certificates of karmada-aggregated-apiserver and karmada-webhook (the APIService's and the webhook
	// configurations' caBundle).
	CAFile string
	// FrontProxyCA signs the aggregator's client certificate (--requestheader-client-ca-file).
	FrontProxyCAFile                     string
	ServingCert, ServingKey              string // kube-apiserver: 127.0.0.1, localhost
	AdminCert, AdminKey                  string
	FrontProxyCert, FrontProxyKey        string
	AggregatedCert, AggregatedKey        string // <service>.<namespace>.svc, 127.0.0.1, localhost
	WebhookCertDir                       string // tls.crt, tls.key: 127.0.0.1, localhost
	ServiceAccountKey, ServiceAccountPub string
	caPEM, adminCertPEM, adminKeyPEM     []byte
}

// newPKI generates and writes every credential of a plane into dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	p := &pki{Dir: dir, WebhookCertDir: filepath.Join(dir, "karmada-webhook")}
	ca, err := newCA("karmada-ca")
	if err != nil {
		return nil, err
	}
	frontCA, err := newCA("karmada-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	p.caPEM = ca.cert
	if p.CAFile, _, err = ca.write(dir, "ca"); err != nil {
		return nil, err
	}
	if p.FrontProxyCAFile, _, err = frontCA.write(dir, "front-proxy-ca"); err != nil {
		return nil, err
	}
	type issued struct {
		kp        func() (*keyPair, error)
		base      string
		cert, key *string
	}
	aggregatedDNS := []string{"localhost",
		AggregatedAPIServerService + "." + SystemNamespace + ".svc",
		AggregatedAPIServerService + "." + SystemNamespace + ".svc.cluster.local"}
	var admin *keyPair
	for _, i := range []issued{
		{func() (*keyPair, error) { return ca.servingCert("karmada-apiserver", "localhost") }, "apiserver", &p.ServingCert, &p.ServingKey},
		{func() (*keyPair, error) {
			kp, err := ca.clientCert(AdminUser, adminGroup)
			admin = kp
			return kp, err
		}, "admin", &p.AdminCert, &p.AdminKey},
		{func() (*keyPair, error) { return frontCA.clientCert(FrontProxyClientCN) }, "front-proxy-client", &p.FrontProxyCert, &p.FrontProxyKey},
		{func() (*keyPair, error) {
			return ca.servingCert(AggregatedAPIServerService, aggregatedDNS...)
		}, "karmada-aggregated-apiserver", &p.AggregatedCert, &p.AggregatedKey},
	} {
		kp, err := i.kp()
		if err != nil {
			return nil, err
		}
		if *i.cert, *i.key, err = kp.write(dir, i.base); err != nil {
			return nil, err
		}
	}
	p.adminCertPEM, p.adminKeyPEM = admin.cert, admin.key
	webhook, err := ca.servingCert("karmada-webhook", "localhost")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.WebhookCertDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", p.WebhookCertDir, err)
	}
	if _, _, err := webhook.write(p.WebhookCertDir, "tls"); err != nil {
		return nil, err
	}
	if p.ServiceAccountKey, p.ServiceAccountPub, err = writeServiceAccountKey(dir); err != nil {
		return nil, err
	}
	return p, nil
}
