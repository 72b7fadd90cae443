package localproc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Loopback is 127.0.0.1:port.
func Loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// FreePort is a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePortBlock finds a base port from which n consecutive loopback ports are free (a cluster's
// port block for tests: PortCount). The block lies below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), where outgoing connections cannot take its ports
// between this check and the components binding them.
func FreePortBlock(n int) (int, error) {
	low := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const floor = 10000
	if low-floor < 2*n {
		return 0, fmt.Errorf("no room for %d ports below the ephemeral range (from %d)", n, low)
	}
	for range 100 {
		base := floor + mrand.IntN((low-floor-n)/n)*n
		free := true
		for p := base; p < base+n && free; p++ {
			busy, _ := PortBusy(p)
			free = !busy
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free loopback ports found between %d and %d in 100 tries", n, floor, low)
}

// FreePorts finds n free loopback ports.
func FreePorts(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ProbeClient checks the health endpoints of processes started on loopback; some serve HTTPS with a
// self-signed certificate (kube-scheduler), of which only liveness is asked.
var ProbeClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probes

// HTTPReady returns a check that passes when url answers 200 through c (and the body contains want,
// if set).
func HTTPReady(c *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		if want != "" && !strings.Contains(string(body), want) {
			return fmt.Errorf("%s answered %s", url, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// HandlerServed passes once a POST of an empty JSON object to url, through c, answers anything but
// 404: a controller-runtime webhook server listens (and reports ready) before its manager registers
// the admission handlers, and until then it answers 404 for their paths.
func HandlerServed(c *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s is not served yet (404)", url)
		}
		return nil
	}
}

// AllReady passes once every check passes, in order.
func AllReady(checks ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, c := range checks {
			if err := c(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// TLSAnswers passes once url answers over TLS with a certificate the CA in caFile signed (any HTTP
// status: a webhook server may serve only its admission paths).
func TLSAnswers(caFile, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return err
		}
		return TLSAnswersCA(ca, url)(ctx)
	}
}

// TLSAnswersCA is TLSAnswers with the CA's PEM.
func TLSAnswersCA(ca []byte, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return errors.New("no certificate in the CA PEM")
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
}

// TLSClient trusts the cluster's CA and presents its admin client certificate.
func (p PKI) TLSClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", p.CACert)
	}
	cert, err := tls.LoadX509KeyPair(p.AdminCert, p.AdminKey)
	if err != nil {
		return nil, fmt.Errorf("loading admin client certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

// WriteSelfSignedCert writes tls.crt and tls.key (ECDSA P-256, valid for 127.0.0.1 and localhost, one
// year) into dir and returns the certificate PEM (usable as a caBundle).
func WriteSelfSignedCert(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing tls.crt: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "tls.key"), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, err
	}
	return certPEM, nil
}
