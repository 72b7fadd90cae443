package localproc

import (
	"crypto"
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

// FrontProxyClientCN is the only client certificate CN the API server lets assert request headers.
const FrontProxyClientCN = "front-proxy-client"

// PKI holds the paths of a local cluster's credentials. Everything is generated fresh on every `up`
// (the etcd data is fresh too, so nothing signed by an older key survives).
type PKI struct {
	Dir         string
	CACert      string // CA of the serving and client certificates
	ServingCert string // 127.0.0.1/localhost serving certificate, used by every component
	ServingKey  string
	AdminCert   string // client certificate CN=hyperbatch-admin, O=system:masters
	AdminKey    string
	ProxyCert   string // front-proxy client certificate (CN=front-proxy-client), for request-header authentication
	ProxyKey    string
	SAKey       string // RSA key signing service-account tokens
	SAPub       string
	// Own serving certificates of the neighbours' webhook servers (127.0.0.1, signed by the CA):
	// Volcano's webhook-manager, and the JobSet controller (tls.crt/tls.key in JobSetCertDir, the
	// layout controller-runtime's webhook server reads).
	VolcanoWebhookCert string
	VolcanoWebhookKey  string
	JobSetCertDir      string
	// KarmadaWebhookCertDir holds karmada-webhook's tls.crt/tls.key (its --cert-dir).
	KarmadaWebhookCertDir string
	// ServingIPs are IP addresses the serving certificate holds beside 127.0.0.1 and the kubernetes
	// Service's ClusterIP (a real-node cluster's API server address).
	ServingIPs []net.IP
}

// NewPKI names the credential files of a cluster below dir (nothing is written).
func NewPKI(dir string) PKI {
	p := func(name string) string { return filepath.Join(dir, name) }
	return PKI{
		Dir: dir, CACert: p("ca.crt"),
		ServingCert: p("serving.crt"), ServingKey: p("serving.key"),
		AdminCert: p("admin.crt"), AdminKey: p("admin.key"),
		ProxyCert: p("front-proxy-client.crt"), ProxyKey: p("front-proxy-client.key"),
		SAKey: p("sa.key"), SAPub: p("sa.pub"),
		VolcanoWebhookCert: p("volcano-webhook.crt"), VolcanoWebhookKey: p("volcano-webhook.key"),
		JobSetCertDir: p("jobset-webhook"), KarmadaWebhookCertDir: p("karmada-webhook"),
	}
}

// Generate writes a CA, a serving certificate, an admin client certificate and the service-account key.
func (p PKI) Generate() error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", p.Dir, err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hyperbatch-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := signCert(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("signing CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parsing CA certificate: %w", err)
	}
	if err := writePEM(p.CACert, "CERTIFICATE", caDER, 0o644); err != nil {
		return err
	}

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "hyperbatch-local"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// A Karmada plane's aggregated apiserver serves with this certificate too: kube-aggregator
		// checks it for the APIService's <service>.<namespace>.svc.
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", KarmadaAggregatedAPIServerService + "." + KarmadaSystemNamespace + ".svc"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), KubernetesServiceIP}, p.ServingIPs...),
	}
	if err := issue(serving, caCert, caKey, p.ServingCert, p.ServingKey); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	admin := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "hyperbatch-admin", Organization: []string{"system:masters"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := issue(admin, caCert, caKey, p.AdminCert, p.AdminKey); err != nil {
		return fmt.Errorf("admin client certificate: %w", err)
	}

	// kube-controller-manager and the scheduler delegate authentication to the API server and expect its
	// request-header CA in kube-system/extension-apiserver-authentication; only this CN may assert headers.
	proxy := &x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyClientCN},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := issue(proxy, caCert, caKey, p.ProxyCert, p.ProxyKey); err != nil {
		return fmt.Errorf("front-proxy client certificate: %w", err)
	}

	for _, w := range []struct{ cn, cert, key string }{
		{"volcano-admission-service", p.VolcanoWebhookCert, p.VolcanoWebhookKey},
		{"jobset-webhook-service", filepath.Join(p.JobSetCertDir, "tls.crt"), filepath.Join(p.JobSetCertDir, "tls.key")},
		{"karmada-webhook", filepath.Join(p.KarmadaWebhookCertDir, "tls.crt"), filepath.Join(p.KarmadaWebhookCertDir, "tls.key")},
	} {
		if err := os.MkdirAll(filepath.Dir(w.cert), 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(w.cert), err)
		}
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: w.cn},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.AddDate(1, 0, 0),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		if err := issue(tmpl, caCert, caKey, w.cert, w.key); err != nil {
			return fmt.Errorf("%s serving certificate: %w", w.cn, err)
		}
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	if err := writePEM(p.SAKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	return writePEM(p.SAPub, "PUBLIC KEY", pub, 0o644)
}

// issue creates a P-256 key, signs tmpl with the CA and writes both as PEM.
func issue(tmpl, ca *x509.Certificate, caKey crypto.Signer, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key: %w", err)
	}
	der, err := signCert(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600)
}

func signCert(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
