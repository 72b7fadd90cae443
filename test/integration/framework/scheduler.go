package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// StartScheduler starts hyperbatch's own scheduler binary (bin/scheduler, `make build`; BinDir is
// HYPERBATCH_BIN when set) with --config, serving HTTPS on a free loopback port (its delegated
// authentication reads kube-system's extension-apiserver-authentication ConfigMap, as in a cluster),
// and waits for /healthz. The configuration names the kubeconfig (clientConnection.kubeconfig).
func StartScheduler(ctx context.Context, o NeighbourOptions, config string) (*Process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if o.BinDir == "" {
		o.BinDir = HyperbatchBinDir()
	}
	args := []string{"--config=" + config, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + o.LogDir, "-v=2"}
	// The scheduler's serving certificate is self-signed; only liveness is checked here.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test readiness probe
	healthz := fmt.Sprintf("https://%s/healthz", loopback(port))
	return start(ctx, o, "scheduler", args, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		if err != nil {
			return err
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: status %d", healthz, resp.StatusCode)
		}
		return nil
	})
}

// HyperbatchBinDir is where `make build` puts bin/manager and bin/scheduler: HYPERBATCH_BIN, or the
// project's bin/.
func HyperbatchBinDir() string {
	if d := os.Getenv("HYPERBATCH_BIN"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin")
}
