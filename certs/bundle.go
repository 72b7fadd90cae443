package certs

import (
	"bytes"
	"crypto/x509"
	"fmt"
)

// MergeBundles concatenates PEM CA bundles, keeping the first occurrence of each certificate (same
// DER bytes) and dropping non-certificate blocks. The order of first occurrences is kept, so the
// current CA can be put first.
func MergeBundles(bundles ...[]byte) ([]byte, error) {
	var all []*x509.Certificate
	for i, b := range bundles {
		certs, err := ParseCerts(b)
		if err != nil {
			return nil, fmt.Errorf("bundle %d: %w", i+1, err)
		}
		all = append(all, certs...)
	}
	return EncodeBundle(dedupe(all)), nil
}

// EncodeBundle writes certificates as concatenated PEM blocks.
func EncodeBundle(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		buf.Write(encodeCert(c))
	}
	return buf.Bytes()
}

func dedupe(certs []*x509.Certificate) []*x509.Certificate {
	out := make([]*x509.Certificate, 0, len(certs))
	for _, c := range certs {
		if !containsCert(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

func sameCerts(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
