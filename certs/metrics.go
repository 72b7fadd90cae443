package certs

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// expiryGauge is hyperbatch_webhook_cert_expiry_timestamp_seconds{secret="ns/name", cert="ca|serving"}:
// the NotAfter of the signing CA and of the serving certificate, as a Unix time. Alert on
// `hyperbatch_webhook_cert_expiry_timestamp_seconds - time() < 7*24*3600`.
var expiryGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "hyperbatch_webhook_cert_expiry_timestamp_seconds",
	Help: "Expiry (NotAfter, Unix seconds) of the webhook CA (cert=\"ca\") and serving certificate (cert=\"serving\").",
}, []string{"secret", "cert"})

func init() {
	metrics.Registry.MustRegister(expiryGauge)
}

func recordExpiry(secret, kind string, c *x509.Certificate) {
	if c != nil {
		expiryGauge.WithLabelValues(secret, kind).Set(float64(c.NotAfter.Unix()))
	}
}
