package certs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// maxWriteAttempts bounds how often one sync re-reads the Secret after losing a write race.
const maxWriteAttempts = 5

// RBAC of the Rotator (config/rbac is generated from these markers). The webhook configurations
// are read by name only; the Secret lives in hyperbatch's own namespace (a Role: the namespace is
// the chart's release namespace, hyperbatch-system in config/rbac).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=hyperbatch-mutating;hyperbatch-validating,verbs=get;patch
// +kubebuilder:rbac:groups="",namespace=hyperbatch-system,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Rotator keeps the webhook certificates valid. It is a manager.Runnable that runs on every replica
// (NeedLeaderElection is false): each replica needs the serving certificate on its own disk. Replicas
// coordinate through the Secret alone: writes carry the resourceVersion that was read, so when two
// replicas rotate at once one write fails with a conflict and that replica re-reads and adopts the
// winner's certificates.
type Rotator struct {
	cfg      Config
	client   client.WithWatch
	clock    clock.Clock
	recorder record.EventRecorder
	log      logr.Logger

	syncMu  sync.Mutex // one sync at a time
	poke    chan struct{}
	ready   chan struct{}
	readyMu sync.Once
	errMu   sync.Mutex
	lastErr error

	// What readiness checks: the caBundles the webhook configurations held at the last sync, and the
	// serving pair of the last sync (used when there is no CertDir to read it from).
	trustMu sync.Mutex
	trusted [][]byte
	serving [2][]byte
}

// Option customises a Rotator.
type Option func(*Rotator)

// WithClient sets the API client. It should be uncached (reads must see other replicas' writes at
// once, and a cache would list every Secret in the cluster); SetupWithManager builds one if unset.
func WithClient(c client.WithWatch) Option { return func(r *Rotator) { r.client = c } }

// WithClock sets the clock for certificate times and the resync timer (tests pass a fake clock).
func WithClock(c clock.Clock) Option { return func(r *Rotator) { r.clock = c } }

// WithEventRecorder sets where Events go; SetupWithManager uses the manager's recorder if unset.
func WithEventRecorder(rec record.EventRecorder) Option { return func(r *Rotator) { r.recorder = rec } }

// WithLogger sets the logger (default: controller-runtime's, named "cert-rotator").
func WithLogger(l logr.Logger) Option { return func(r *Rotator) { r.log = l } }

// New validates cfg (after defaulting it) and returns a Rotator. The client may be given now
// (WithClient) or be built by SetupWithManager.
func New(cfg Config, opts ...Option) (*Rotator, error) {
	cfg = cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("webhook certificate config: %w", err)
	}
	r := &Rotator{
		cfg:   cfg,
		clock: clock.RealClock{},
		log:   ctrl.Log.WithName("cert-rotator"),
		poke:  make(chan struct{}, 1),
		ready: make(chan struct{}),
	}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.WithValues("secret", r.secretRef(), "mode", cfg.Mode)
	r.setErr(errors.New("no sync has completed yet"))
	return r, nil
}

// SetupWithManager fills in what was not given (an uncached client on the manager's config, the
// manager's event recorder) and adds the Rotator and its readiness check ("webhook-certs") to mgr.
func (r *Rotator) SetupWithManager(mgr manager.Manager) error {
	if r.client == nil {
		c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
		if err != nil {
			return fmt.Errorf("creating the certificate rotator's client: %w", err)
		}
		r.client = c
	}
	if r.recorder == nil {
		r.recorder = mgr.GetEventRecorderFor("hyperbatch-cert-rotator")
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("adding the certificate rotator: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-certs", r.Checker()); err != nil {
		return fmt.Errorf("adding the webhook-certs readiness check: %w", err)
	}
	return nil
}

// Config returns the defaulted configuration.
func (r *Rotator) Config() Config { return r.cfg }

// NeedLeaderElection is false: every replica serves webhooks and needs the certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Ready is closed once the first sync succeeded: in self mode the certificates are in the Secret,
// in CertDir and in every configured webhook configuration; in cert-manager mode cert-manager has
// done the same. It stays closed (it gates the webhook server's start).
func (r *Rotator) Ready() <-chan struct{} { return r.ready }

// Checker is a healthz.Checker (for the manager's /readyz). It fails, with the last error, until
// Ready is closed; after that it fails whenever the serving certificate (the one in CertDir, which the
// webhook server's certwatcher serves) is unreadable, not yet valid, expired, or not verified by a
// caBundle the webhook configurations held at the last sync. A replica that would fail the apiserver's
// TLS handshake thus leaves the Service's endpoints. A failed sync alone (the apiserver unreachable,
// say) does not fail readiness while the served certificate is still good: taking every replica out
// of the Service for that would turn a control-plane hiccup into refused admissions.
func (r *Rotator) Checker() healthz.Checker {
	return func(*http.Request) error {
		select {
		case <-r.ready:
		default:
			return fmt.Errorf("webhook certificates are not ready: %w", r.err())
		}
		return r.checkServing()
	}
}

// checkServing verifies the served certificate at the Rotator's clock.
func (r *Rotator) checkServing() error {
	r.trustMu.Lock()
	crt, key, trusted := r.serving[0], r.serving[1], r.trusted
	r.trustMu.Unlock()
	where := "the last synced Secret " + r.secretRef()
	if r.cfg.CertDir != "" {
		where = r.cfg.CertDir
		var errCrt, errKey error
		crt, errCrt = os.ReadFile(filepath.Join(r.cfg.CertDir, TLSCertKey))
		key, errKey = os.ReadFile(filepath.Join(r.cfg.CertDir, TLSKeyKey))
		if err := errors.Join(errCrt, errKey); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
	}
	kp, err := ParseKeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("serving certificate in %s is unusable: %w", where, err)
	}
	now, c := r.clock.Now(), kp.Cert
	switch {
	case now.Before(c.NotBefore):
		return fmt.Errorf("serving certificate serial %x in %s is not valid before %s", c.SerialNumber, where, c.NotBefore.Format(time.RFC3339))
	case now.After(c.NotAfter):
		return fmt.Errorf("serving certificate serial %x in %s expired at %s", c.SerialNumber, where, c.NotAfter.Format(time.RFC3339))
	}
	for _, b := range trusted {
		cas, err := ParseCerts(b)
		if err == nil {
			err = Verify(c, cas, now)
		}
		if err != nil {
			return fmt.Errorf("serving certificate serial %x in %s is not trusted by the webhook configurations' caBundle: %w", c.SerialNumber, where, err)
		}
	}
	return nil
}

// setTrusted records the caBundles the webhook configurations hold, for checkServing.
func (r *Rotator) setTrusted(bundles [][]byte) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	r.trusted = bundles
}

// setServing records the serving pair of the last sync, for checkServing when there is no CertDir.
func (r *Rotator) setServing(tlsCrt, tlsKey []byte) {
	r.trustMu.Lock()
	defer r.trustMu.Unlock()
	r.serving = [2][]byte{tlsCrt, tlsKey}
}

// Start runs the sync loop until ctx ends. Syncs happen at start, when a certificate or a CA-rotation
// step is due, every ResyncInterval, and (self mode) whenever the Secret or a configured webhook
// configuration changes (watched), so an overwritten caBundle is restored within seconds. A failed
// sync is retried with back-off from 1s up to 30s.
func (r *Rotator) Start(ctx context.Context) error {
	if r.client == nil {
		return errors.New("certificate rotator has no client: use WithClient or SetupWithManager")
	}
	r.log.Info("starting webhook certificate management", "certDir", r.cfg.CertDir, "dnsNames", r.cfg.DNSNames,
		"ipAddresses", r.cfg.IPAddresses, "mutating", r.cfg.MutatingWebhookConfigurations, "validating", r.cfg.ValidatingWebhookConfigurations)
	if r.cfg.Mode == ModeSelf {
		r.startWatches(ctx)
	}
	backoff := time.Second
	for {
		next, err := r.sync(ctx)
		select {
		case <-ctx.Done():
			return nil // shutting down; a sync cut short by it is no failure
		default:
		}
		var wait <-chan time.Time
		var stop func() bool
		switch d := next.Sub(r.clock.Now()); {
		case err != nil:
			r.log.Error(err, "webhook certificate sync failed", "retryIn", backoff)
			t := time.NewTimer(backoff) // wall time: a stopped test clock must not wedge retries
			wait, stop = t.C, t.Stop
			backoff = min(2*backoff, 30*time.Second)
		case d > 0:
			backoff = time.Second
			t := r.clock.NewTimer(min(d, r.cfg.ResyncInterval))
			wait, stop = t.C(), t.Stop
		default: // something is due already (should not happen after a sync); don't spin
			t := time.NewTimer(time.Second)
			wait, stop = t.C, t.Stop
		}
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-r.poke:
		case <-wait:
		}
		stop()
	}
}

// Sync runs one sync now (tests call it to step through rotations deterministically).
func (r *Rotator) Sync(ctx context.Context) error {
	_, err := r.sync(ctx)
	return err
}

func (r *Rotator) sync(ctx context.Context) (time.Time, error) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	var next time.Time
	var err error
	if r.cfg.Mode == ModeCertManager {
		next, err = r.checkCertManager(ctx)
	} else {
		next, err = r.syncSelf(ctx)
	}
	r.setErr(err)
	if err == nil {
		r.readyMu.Do(func() {
			r.log.Info("webhook certificates are ready")
			close(r.ready)
		})
	}
	return next, err
}

// syncSelf brings the Secret up to date, then the cert dir, then the webhook configurations.
func (r *Rotator) syncSelf(ctx context.Context) (time.Time, error) {
	var p *plan
	for attempt := 1; ; attempt++ {
		var retry bool
		var err error
		p, retry, err = r.syncSecret(ctx)
		if err == nil {
			break
		}
		if !retry || attempt == maxWriteAttempts {
			return time.Time{}, err
		}
		r.log.V(1).Info("lost a race writing the Secret; re-reading", "attempt", attempt, "reason", err.Error())
	}
	// The bundle first, then the files: a certificate is served only once its CA is in caBundle.
	held, err := r.inject(ctx, p.Data[CACertKey])
	r.setTrusted(held)
	if err != nil {
		return time.Time{}, err
	}
	changed, err := WriteFiles(r.cfg.CertDir, certFiles(p))
	if err != nil {
		return time.Time{}, fmt.Errorf("writing certificates to %s: %w", r.cfg.CertDir, err)
	}
	if changed {
		r.log.Info("wrote webhook certificates", "certDir", r.cfg.CertDir, "servingSerial", fmt.Sprintf("%x", p.Serving.Cert.SerialNumber))
	}
	r.setServing(p.Data[TLSCertKey], p.Data[TLSKeyKey])
	recordExpiry(r.secretRef(), "ca", p.CA.Cert)
	recordExpiry(r.secretRef(), "serving", p.Serving.Cert)
	return p.Next, nil
}

// syncSecret reads the Secret, computes the plan and writes it if it differs. retry is true when the
// write lost a race with another replica (conflict or already exists).
func (r *Rotator) syncSecret(ctx context.Context) (*plan, bool, error) {
	secret := &corev1.Secret{}
	err := r.client.Get(ctx, r.secretKey(), secret)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("reading Secret %s: %w", r.secretRef(), err)
	}
	var rec recovery
	if bundle, err := ParseCerts(secret.Data[CACertKey]); !hasSigner(bundle, secret.Data[CAKeyKey], err) {
		// The CA is lost (or this is the first start): keep what verifiers trust now.
		rec = r.recover(ctx)
	}
	p, err := computePlan(r.cfg, r.clock.Now(), secret.Data, rec)
	if err != nil {
		return nil, false, fmt.Errorf("computing certificates for Secret %s: %w", r.secretRef(), err)
	}
	if exists && dataEqual(p.Data, secret.Data) {
		return p, false, nil
	}
	if exists {
		data := make(map[string][]byte, len(secret.Data)+4)
		for k, v := range secret.Data {
			data[k] = v
		}
		for k, v := range p.Data {
			data[k] = v
		}
		secret.Data = data
		err = r.client.Update(ctx, secret)
	} else {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: r.cfg.SecretNamespace, Name: r.cfg.SecretName,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "hyperbatch", "app.kubernetes.io/component": "webhook-certs"},
			},
			Type: corev1.SecretTypeTLS,
			Data: p.Data,
		}
		err = r.client.Create(ctx, secret)
	}
	if err != nil {
		retry := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
		return nil, retry, fmt.Errorf("writing Secret %s: %w", r.secretRef(), err)
	}
	for _, c := range p.Changes {
		r.log.Info(c.Message, "reason", c.Reason)
		r.event(secret, c.Reason, c.Message)
	}
	return p, false, nil
}

// poked asks the loop for a sync soon; it never blocks.
func (r *Rotator) poked() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

func (r *Rotator) event(obj runtime.Object, reason, msg string) {
	if r.recorder != nil {
		r.recorder.Event(obj, corev1.EventTypeNormal, reason, msg)
	}
}

func (r *Rotator) setErr(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.lastErr = err
}

func (r *Rotator) err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.lastErr == nil {
		return errors.New("unknown")
	}
	return r.lastErr
}

func (r *Rotator) secretKey() client.ObjectKey {
	return client.ObjectKey{Namespace: r.cfg.SecretNamespace, Name: r.cfg.SecretName}
}

func (r *Rotator) secretRef() string { return r.cfg.SecretNamespace + "/" + r.cfg.SecretName }
