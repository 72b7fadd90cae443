package certs

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestMergeBundlesDedupesAndKeepsOrder(t *testing.T) {
	a, b, c := mustCA(t, t0, time.Hour), mustCA(t, t0, time.Hour), mustCA(t, t0, time.Hour)
	junk := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not a cert")})
	first := EncodeBundle([]*x509.Certificate{b.Cert, a.Cert})
	second := append(append([]byte{}, junk...), EncodeBundle([]*x509.Certificate{a.Cert, c.Cert, b.Cert})...)

	merged, err := MergeBundles(first, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCerts(merged)
	if err != nil {
		t.Fatal(err)
	}
	want := []*x509.Certificate{b.Cert, a.Cert, c.Cert}
	if !sameCerts(got, want) {
		t.Fatalf("merged %d certificates, want b, a, c", len(got))
	}
	again, _ := MergeBundles(merged, merged)
	if string(again) != string(merged) {
		t.Fatal("merging a bundle with itself changed it")
	}
	if _, err := MergeBundles([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")); err == nil {
		t.Fatal("a corrupt certificate block must be an error")
	}
}
