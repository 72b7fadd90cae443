// Package certs manages the admission webhook's TLS certificates without cert-manager.
//
// In self mode (the default) a Rotator, running on every manager replica:
//
//  1. keeps a Secret (default hyperbatch-system/hyperbatch-webhook-tls, type kubernetes.io/tls) holding
//     ca.crt (the CA bundle), ca.key, tls.crt and tls.key: an ECDSA P-256 self-signed CA (default 10
//     years) and a serving certificate it signed for the Service's DNS names and any extra IP SANs
//     (default 1 year). Other keys in the Secret are preserved;
//  2. publishes ca.crt, tls.crt and tls.key into the webhook server's cert dir atomically (files in a
//     fresh version directory, then one rename of the ..data symlink, as the kubelet does for Secret
//     volumes), so controller-runtime's certwatcher swaps the pair in flight and never reads a new
//     certificate with an old key;
//  3. sets clientConfig.caBundle of every entry of the named Mutating/ValidatingWebhookConfigurations
//     with a strategic-merge patch that names only caBundle (and pins the resourceVersion read), and
//     restores it within seconds when someone overwrites it: the configurations and the Secret are
//     watched (field selector on the name); a periodic resync (ResyncInterval) is the backstop;
//  4. renews a certificate when less than 1/3 of its lifetime (or 30 days, at most half of it) is
//     left, the lifetime counted from issue (without NotBefore's backdate), and re-issues at once a
//     serving certificate issued for longer than CertValidity (a shortened validity). A CA rotation
//     takes three steps CAOverlap apart: the new CA joins the bundle (old + new), then the serving
//     certificate is re-issued from it, then the old CA leaves. No client that refreshed its bundle
//     within CAOverlap ever meets a certificate it cannot verify. Each sync injects the bundle before
//     it changes the files, so a certificate is served only once its CA is in caBundle;
//  5. recovers a lost CA (Secret deleted, ca.crt/ca.key unreadable or not matching) with the same
//     overlap: the unexpired CAs the webhook configurations' caBundles and the cert dir's ca.crt hold
//     stay in the bundle next to a new CA, and the certificate in the cert dir is kept until the new
//     CA has spread (Event CARecovered);
//  6. closes Ready() once the files are on disk and injected. Checker() (for /readyz) then keeps
//     failing while the certificate in the cert dir is unreadable, not yet valid, expired, or not
//     verified by a caBundle the webhook configurations held at the last sync; a failed sync alone
//     does not fail it.
//
// Replicas elect no leader for this: each reads the Secret, and writes carry the resourceVersion it
// read, so of two replicas rotating at once one gets a conflict, re-reads and adopts the winner's
// certificates. Each change is logged, recorded as an Event on the Secret (or the webhook
// configuration), and hyperbatch_webhook_cert_expiry_timestamp_seconds{secret,cert="ca|serving"}
// exports both expiries. The clock is injectable (WithClock) so tests can force every rotation.
//
// In cert-manager mode the Rotator changes nothing: it checks that a cert-manager Certificate filled
// the Secret and cainjector filled every caBundle, and its errors name what to create.
//
// Wiring in a manager:
//
//	rot, err := certs.New(certs.Config{CertDir: dir,
//		MutatingWebhookConfigurations:   []string{"hyperbatch-mutating"},
//		ValidatingWebhookConfigurations: []string{"hyperbatch-validating"}})
//	srv := certs.WaitForCerts(webhook.NewServer(webhook.Options{CertDir: dir}), rot.Ready())
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{WebhookServer: srv})
//	err = rot.SetupWithManager(mgr) // adds the runnable and the "webhook-certs" readyz check
//
// The manager starts the webhook server once something calls mgr.GetWebhookServer() (webhook
// builders do). The manager's scheme must hold core/v1 and admissionregistration/v1 (client-go's
// scheme does).
//
// RBAC: on the Secret get, create, update, list and watch (list/watch use a metadata.name field
// selector, so resourceNames can restrict all but create); on the named webhook configurations get,
// patch, list and watch; on events create and patch.
package certs
