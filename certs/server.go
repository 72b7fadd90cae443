package certs

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// WaitForCerts wraps a webhook server so its Start blocks until ready is closed (pass
// Rotator.Ready()). controller-runtime's webhook server fails at start when tls.crt is not in its cert
// dir yet; gated, it starts listening only once the Rotator has written the files. The manager starts
// webhook servers and other runnables concurrently, so this cannot deadlock. Everything else
// (Register, StartedChecker, WebhookMux) is the wrapped server's.
func WaitForCerts(srv webhook.Server, ready <-chan struct{}) webhook.Server {
	return &gatedServer{Server: srv, ready: ready}
}

type gatedServer struct {
	webhook.Server
	ready <-chan struct{}
}

// Start waits for the certificates, then runs the wrapped server until ctx ends.
func (g *gatedServer) Start(ctx context.Context) error {
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil
	}
	return g.Server.Start(ctx)
}
