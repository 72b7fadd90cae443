package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
)

// recover gathers, when the Secret's CA is lost, what verifiers and this replica use right now: the
// caBundle of every entry of the configured webhook configurations, and the ca.crt, tls.crt and
// tls.key this replica serves from its cert dir. What cannot be read is skipped: recovery is best
// effort, and without anything to keep a fresh CA is simply created.
func (r *Rotator) recover(ctx context.Context) recovery {
	var rec recovery
	var bundles [][]byte
	if r.cfg.CertDir != "" {
		read := func(name string) []byte {
			b, err := os.ReadFile(filepath.Join(r.cfg.CertDir, name))
			if err != nil && !os.IsNotExist(err) {
				r.log.Info("cannot read the cert dir while recovering the CA", "file", name, "error", err.Error())
			}
			return b
		}
		bundles = append(bundles, read(CACertKey))
		rec.TLSCert, rec.TLSKey = read(TLSCertKey), read(TLSKeyKey)
	}
	for _, w := range r.webhookConfigs() {
		_, entries, names, err := w.get(ctx, r.client)
		if err != nil {
			r.log.Info("cannot read a webhook configuration while recovering the CA", "error", err.Error())
			continue
		}
		for _, n := range names {
			bundles = append(bundles, entries[n])
		}
	}
	rec.Bundle = bytes.Join(bundles, []byte("\n"))
	return rec
}
