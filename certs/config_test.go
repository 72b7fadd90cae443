package certs

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigDefault(t *testing.T) {
	c := Config{CertDir: "/tmp/x"}.Default()
	if c.Mode != ModeSelf || c.SecretNamespace != "hyperbatch-system" || c.SecretName != "hyperbatch-webhook-tls" {
		t.Fatalf("defaults: %+v", c)
	}
	want := []string{"hyperbatch-webhook", "hyperbatch-webhook.hyperbatch-system", "hyperbatch-webhook.hyperbatch-system.svc", "hyperbatch-webhook.hyperbatch-system.svc.cluster.local"}
	if !slices.Equal(c.DNSNames, want) {
		t.Fatalf("DNS names %v, want %v", c.DNSNames, want)
	}
	if c.CAValidity != 10*365*24*time.Hour || c.CertValidity != 365*24*time.Hour || c.RenewFraction != 1.0/3 || c.RenewBefore != 30*24*time.Hour {
		t.Fatalf("validity defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := (Config{DNSNames: []string{"x"}}).Default(); !slices.Equal(d.DNSNames, []string{"x"}) {
		t.Fatal("explicit DNS names were replaced")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := Config{Mode: "magic", RenewFraction: 1, CAValidity: time.Hour, CertValidity: 2 * time.Hour, CAOverlap: -1}.Default()
	err := bad.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`mode "magic"`, "renewFraction", "exceeds caValidity", "caOverlap"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := (Config{}).Default().Validate(); err == nil || !strings.Contains(err.Error(), "certDir") {
		t.Fatalf("self mode without certDir: %v", err)
	}
	if err := (Config{Mode: ModeCertManager}).Default().Validate(); err != nil {
		t.Fatalf("cert-manager mode needs no certDir: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}
