package certs

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Mode selects who issues the webhook serving certificate.
type Mode string

const (
	// ModeSelf makes hyperbatch run its own CA: the Rotator creates and rotates the Secret, writes the
	// files into the webhook server's cert dir and injects the CA bundle into the webhook configurations.
	ModeSelf Mode = "self"
	// ModeCertManager leaves issuing to cert-manager (a Certificate fills the Secret, its cainjector fills
	// caBundle). The Rotator then only checks that this happened and reports readiness.
	ModeCertManager Mode = "cert-manager"
)

// Defaults applied by Config.Default.
const (
	DefaultSecretNamespace = "hyperbatch-system"
	DefaultSecretName      = "hyperbatch-webhook-tls"
	DefaultServiceName     = "hyperbatch-webhook"
	DefaultCertificateName = "hyperbatch-webhook-cert"
	DefaultCAValidity      = 10 * 365 * 24 * time.Hour
	DefaultCertValidity    = 365 * 24 * time.Hour
	DefaultRenewFraction   = 1.0 / 3.0
	DefaultRenewBefore     = 30 * 24 * time.Hour
	DefaultCAOverlap       = time.Hour
	DefaultResyncInterval  = 5 * time.Minute
)

// Config describes the certificates, where they live and which webhook configurations trust them.
// Zero fields take the defaults listed above (see Default).
type Config struct {
	// Mode is ModeSelf (default) or ModeCertManager.
	Mode Mode

	// SecretNamespace and SecretName name the Secret holding ca.crt, ca.key, tls.crt and tls.key
	// (type kubernetes.io/tls). Default hyperbatch-system/hyperbatch-webhook-tls.
	SecretNamespace string
	SecretName      string

	// CertDir is the webhook server's certificate directory (webhook.Options.CertDir). In self mode
	// the Rotator writes tls.crt, tls.key and ca.crt there; it must be writable (an emptyDir), not a
	// mounted Secret volume. In cert-manager mode it is optional and only checked for tls.crt/tls.key.
	CertDir string

	// ServiceName is the webhook Service, in SecretNamespace. When DNSNames is empty the serving
	// certificate covers <svc>, <svc>.<ns>, <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local.
	ServiceName string
	// DNSNames replaces the names derived from ServiceName.
	DNSNames []string
	// IPAddresses are extra IP SANs, for URL-style webhooks such as https://127.0.0.1:9443/...
	IPAddresses []net.IP

	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations are the (cluster-scoped)
	// configurations whose every webhook entry gets clientConfig.caBundle. Each must exist.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string

	// CAValidity (default 10 years) and CertValidity (default 1 year) are the lifetimes of newly
	// issued CA and serving certificates. A serving certificate never outlives its CA.
	CAValidity   time.Duration
	CertValidity time.Duration

	// A certificate is renewed once the time left is below the larger of RenewFraction of its lifetime
	// (default 1/3) and RenewBefore (default 30 days; capped at half the lifetime so short-lived
	// certificates are not renewed in a loop). This applies to the CA and the serving certificate.
	RenewFraction float64
	RenewBefore   time.Duration

	// CAOverlap (default 1h) paces a CA rotation: the new CA is first only added to the bundle; the
	// serving certificate is re-issued from it CAOverlap later, and the old CA leaves the bundle
	// CAOverlap after that. It must cover ResyncInterval plus the apiserver's and certwatcher's pick-up
	// delay (certwatcher polls every 10s) so no client ever sees a certificate its bundle cannot verify.
	CAOverlap time.Duration

	// ResyncInterval (default 5m) is the backstop period of the sync loop; changes to the Secret and the
	// webhook configurations are also watched, so overwritten caBundles are repaired within seconds.
	ResyncInterval time.Duration

	// CertificateName names the cert-manager Certificate suggested in cert-manager mode's errors.
	CertificateName string
}

// Default returns a copy of c with every zero field set to its default.
func (c Config) Default() Config {
	if c.Mode == "" {
		c.Mode = ModeSelf
	}
	if c.SecretNamespace == "" {
		c.SecretNamespace = DefaultSecretNamespace
	}
	if c.SecretName == "" {
		c.SecretName = DefaultSecretName
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if len(c.DNSNames) == 0 {
		svc, ns := c.ServiceName, c.SecretNamespace
		c.DNSNames = []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
	}
	if c.CAValidity == 0 {
		c.CAValidity = DefaultCAValidity
	}
	if c.CertValidity == 0 {
		c.CertValidity = DefaultCertValidity
	}
	if c.RenewFraction == 0 {
		c.RenewFraction = DefaultRenewFraction
	}
	if c.RenewBefore == 0 {
		c.RenewBefore = DefaultRenewBefore
	}
	if c.CAOverlap == 0 {
		c.CAOverlap = DefaultCAOverlap
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	if c.CertificateName == "" {
		c.CertificateName = DefaultCertificateName
	}
	return c
}

// Validate reports every problem with an already defaulted Config.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case ModeSelf:
		if c.CertDir == "" {
			errs = append(errs, errors.New("certDir is required in self mode"))
		}
	case ModeCertManager:
	default:
		errs = append(errs, fmt.Errorf("mode %q is neither %q nor %q", c.Mode, ModeSelf, ModeCertManager))
	}
	if c.RenewFraction <= 0 || c.RenewFraction >= 1 {
		errs = append(errs, fmt.Errorf("renewFraction %v must be in (0, 1)", c.RenewFraction))
	}
	for name, d := range map[string]time.Duration{
		"caValidity": c.CAValidity, "certValidity": c.CertValidity, "renewBefore": c.RenewBefore,
		"caOverlap": c.CAOverlap, "resyncInterval": c.ResyncInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", name, d))
		}
	}
	if c.CertValidity > c.CAValidity {
		errs = append(errs, fmt.Errorf("certValidity %v exceeds caValidity %v", c.CertValidity, c.CAValidity))
	}
	if len(c.DNSNames) == 0 && len(c.IPAddresses) == 0 {
		errs = append(errs, errors.New("the serving certificate needs at least one DNS name or IP address"))
	}
	return errors.Join(errs...)
}
