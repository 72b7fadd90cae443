//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/certs"
	"github.com/hyperbatch/hyperbatch/internal/defaults"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// servingCert is the serving certificate in the manager's Secret and the CA bundle beside it.
func servingCert(ctx context.Context) (*x509.Certificate, *x509.CertPool, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: e2efw.ChartNamespace, Name: "hyperbatch-webhook-tls"}, &s); err != nil {
		return nil, nil, err
	}
	crts, err := certs.ParseCerts(s.Data[certs.TLSCertKey])
	if err != nil {
		return nil, nil, fmt.Errorf("Secret %s/hyperbatch-webhook-tls: %s unreadable: %w", e2efw.ChartNamespace, certs.TLSCertKey, err)
	}
	if len(crts) == 0 {
		return nil, nil, fmt.Errorf("Secret %s/hyperbatch-webhook-tls: no certificate in %s", e2efw.ChartNamespace, certs.TLSCertKey)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[certs.CACertKey]) {
		return nil, nil, fmt.Errorf("Secret %s/hyperbatch-webhook-tls: no CA in %s", e2efw.ChartNamespace, certs.CACertKey)
	}
	return crts[0], pool, nil
}

// servedSerials dials every manager pod's webhook port (the host reaches pod IPs on the bridge) and
// returns each pod's certificate serial, verified against roots for the Service's name, or why the
// handshake failed (a pod between certificates is dialled again by the caller).
func servedSerials(ctx context.Context, roots *x509.CertPool) (map[string]string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(e2efw.ChartNamespace), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "hyperbatch-webhook." + e2efw.ChartNamespace + ".svc", MinVersion: tls.VersionTLS12}}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(p.Status.PodIP, "9443"))
		if err != nil {
			out[p.Name] = "handshake failed: " + err.Error()
			continue
		}
		out[p.Name] = conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
		_ = conn.Close()
	}
	return out, nil
}

// waitRotation waits until the Secret's serving certificate is another than serial and returns it.
func waitRotation(t *testing.T, serial string, timeout time.Duration, what string) *x509.Certificate {
	t.Helper()
	var cur *x509.Certificate
	e2efw.Poll(t, timeout, what, func(ctx context.Context) (bool, error) {
		crt, _, err := servingCert(ctx)
		if err != nil {
			return false, err
		}
		cur = crt
		return crt.SerialNumber.Text(16) != serial, nil
	})
	return cur
}

// certs.certValidity shortened to 3 minutes by `helm upgrade`: the new manager pods re-issue the
// serving certificate for 3 minutes at once, then renew it when half of it is left, inside the pods
// (Secret, cert files, the webhook server's certwatcher); both replicas serve the renewed
// certificate, which the unchanged caBundle verifies, and no admission fails meanwhile: a dry-run
// PodGroup create (hyperbatch's PodGroup webhook is fail-closed) and a Pod create (defaulted by the
// Pod webhook) every 200 ms. The release is upgraded back to its values afterwards.
func TestChartCertRotationWithShortValidity(t *testing.T) {
	e2efw.SkipUnlessChart(t, "it upgrades the release with a 3-minute serving certificate")
	ctx := context.Background()
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(helmOK(t, "get", "values", e2efw.ChartRelease, "-n", e2efw.ChartNamespace, "-o", "yaml")), 0o600))
	t.Cleanup(func() {
		out, err := primary.Helm("upgrade", e2efw.ChartRelease, e2efw.ChartDir(), "-n", e2efw.ChartNamespace, "--values", values)
		if err != nil {
			t.Errorf("upgrading the release back to its values: %v\n%s", err, out)
			return
		}
		waitDeploymentReady(t, "hyperbatch-manager")
	})
	ns := primary.Namespace(t)
	queue := "certs-" + ns
	governedNamespaces(t, queue, ns)
	before, _, err := servingCert(ctx)
	require.NoError(t, err)

	const validity = 3 * time.Minute
	upgraded := time.Now()
	helmOK(t, "upgrade", e2efw.ChartRelease, e2efw.ChartDir(), "-n", e2efw.ChartNamespace, "--values", values, "--set", "certs.certValidity="+validity.String())
	waitDeploymentReady(t, "hyperbatch-manager")
	first := waitRotation(t, before.SerialNumber.Text(16), 2*time.Minute, "the new pods to re-issue the serving certificate for "+validity.String())
	reissued := time.Since(upgraded)
	require.Equal(t, validity, first.NotAfter.Sub(first.NotBefore)-5*time.Minute, "lifetime of serial %x (NotBefore is backdated 5 minutes)", first.SerialNumber)

	// Admission under way through the renewal.
	var (
		mu      sync.Mutex
		calls   int
		failed  []string
		stop    = make(chan struct{})
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			errPG := c.Create(cctx, builders.MakePodGroup(ns, fmt.Sprintf("probe-%d", i)).Obj(), client.DryRunAll)
			pod := streamPod(ns)
			errPod := c.Create(cctx, pod)
			cancel()
			mu.Lock()
			calls++
			at := time.Now().Format("15:04:05.000")
			if errPG != nil {
				failed = append(failed, fmt.Sprintf("%s PodGroup: %v", at, errPG))
			}
			if errPod != nil {
				failed = append(failed, fmt.Sprintf("%s Pod: %v", at, errPod))
			} else if pod.Annotations[defaults.QueueNameAnnotation] != queue {
				failed = append(failed, fmt.Sprintf("%s Pod %s not defaulted", at, pod.Name))
			}
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-stopped
	}()

	second := waitRotation(t, first.SerialNumber.Text(16), validity, "the renewal of the 3-minute certificate")
	renewedAfter := second.NotBefore.Add(5 * time.Minute).Sub(first.NotBefore.Add(5 * time.Minute))
	serial := second.SerialNumber.Text(16)
	var served map[string]string
	e2efw.Poll(t, 60*time.Second, "both manager pods to serve serial "+serial+" (failed admissions are counted by the stream)", func(ctx context.Context) (bool, error) {
		_, roots, err := servingCert(ctx)
		if err != nil {
			return false, err
		}
		if served, err = servedSerials(ctx, roots); err != nil {
			return false, err
		}
		n := 0
		for _, s := range served {
			if s == serial {
				n++
			}
		}
		return len(served) == 2 && n == 2, nil
	})
	servedAfter := time.Since(second.NotBefore.Add(5 * time.Minute))
	count := func() int { mu.Lock(); defer mu.Unlock(); return calls }
	n := count()
	e2efw.Poll(t, 30*time.Second, "10 more admission rounds on the renewed certificate", func(context.Context) (bool, error) { return count() >= n+10, nil })
	close(stop)
	<-stopped

	var evs corev1.EventList
	require.NoError(t, c.List(ctx, &evs, client.InNamespace(e2efw.ChartNamespace), client.MatchingFields{"involvedObject.name": "hyperbatch-webhook-tls"}))
	rotated := 0
	for _, e := range evs.Items {
		if e.Reason == certs.ReasonServingCertRotated {
			rotated++
		}
	}
	assert.GreaterOrEqual(t, rotated, 1, "no %s Event on the Secret", certs.ReasonServingCertRotated)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, failed, "of %d admission rounds, these failed", calls)
	assert.Positive(t, calls)
	t.Logf("certificate rotation: upgrade to %s re-issued serial %x after %s; renewed to serial %s %s after its issue; both pods served it %s after the renewal; %d admission rounds (PodGroup dry-run + Pod) during it, %d failed",
		validity, first.SerialNumber, reissued.Round(100*time.Millisecond), serial, renewedAfter.Round(time.Second), servedAfter.Round(100*time.Millisecond), calls, len(failed))
}
