package certs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// checkCertManager is the whole of cert-manager mode: it changes nothing and only verifies that
// cert-manager filled the Secret (a Certificate) and every webhook entry's caBundle (cainjector), and,
// when CertDir is set, that the mounted files are there. Errors say what to create.
func (r *Rotator) checkCertManager(ctx context.Context) (time.Time, error) {
	now := r.clock.Now()
	hint := fmt.Sprintf("create a cert-manager Certificate %s/%s with spec.secretName %q and spec.dnsNames %v (and an Issuer)",
		r.cfg.SecretNamespace, r.cfg.CertificateName, r.cfg.SecretName, r.cfg.DNSNames)
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, r.secretKey(), secret); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("cert-manager mode: Secret %s does not exist: %s", r.secretRef(), hint)
		}
		return time.Time{}, fmt.Errorf("cert-manager mode: reading Secret %s: %w", r.secretRef(), err)
	}
	serving, err := ParseKeyPair(secret.Data[TLSCertKey], secret.Data[TLSKeyKey])
	if err != nil {
		return time.Time{}, fmt.Errorf("cert-manager mode: Secret %s has no usable %s/%s (%w): %s", r.secretRef(), TLSCertKey, TLSKeyKey, err, hint)
	}
	cas, err := ParseCerts(secret.Data[CACertKey])
	if err == nil && len(cas) == 0 {
		err = errors.New("no certificate")
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("cert-manager mode: Secret %s has no usable %s (%w): issue the Certificate from a CA Issuer", r.secretRef(), CACertKey, err)
	}
	if err := Verify(serving.Cert, cas, now); err != nil {
		return time.Time{}, fmt.Errorf("cert-manager mode: Secret %s: %w", r.secretRef(), err)
	}
	var trusted [][]byte
	r.setServing(secret.Data[TLSCertKey], secret.Data[TLSKeyKey])
	defer func() { r.setTrusted(trusted) }()
	for _, w := range r.webhookConfigs() {
		_, bundles, names, err := w.get(ctx, r.client)
		if err != nil {
			return time.Time{}, fmt.Errorf("cert-manager mode: %w", err)
		}
		for _, n := range names {
			trusted = append(trusted, bundles[n])
		}
		for _, n := range names {
			cas, err := ParseCerts(bundles[n])
			if err == nil {
				err = Verify(serving.Cert, cas, now)
			}
			if err != nil {
				return time.Time{}, fmt.Errorf("cert-manager mode: webhook %s of %s %s does not trust Secret %s (%w): annotate it with cert-manager.io/inject-ca-from: %s/%s so cert-manager's cainjector sets caBundle",
					n, w.kind, w.name, r.secretRef(), err, r.cfg.SecretNamespace, r.cfg.CertificateName)
			}
		}
	}
	if r.cfg.CertDir != "" {
		crt, errCrt := os.ReadFile(filepath.Join(r.cfg.CertDir, TLSCertKey))
		key, errKey := os.ReadFile(filepath.Join(r.cfg.CertDir, TLSKeyKey))
		if err := errors.Join(errCrt, errKey); err != nil {
			return time.Time{}, fmt.Errorf("cert-manager mode: mount Secret %s at %s: %w", r.secretRef(), r.cfg.CertDir, err)
		}
		if _, err := ParseKeyPair(crt, key); err != nil {
			return time.Time{}, fmt.Errorf("cert-manager mode: certificate in %s: %w", r.cfg.CertDir, err)
		}
	}
	recordExpiry(r.secretRef(), "ca", cas[0])
	recordExpiry(r.secretRef(), "serving", serving.Cert)
	return now.Add(r.cfg.ResyncInterval), nil
}
