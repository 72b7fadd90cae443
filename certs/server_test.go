package certs

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

type recordingServer struct {
	webhook.Server
	started chan struct{}
}

func (s *recordingServer) Start(ctx context.Context) error {
	close(s.started)
	<-ctx.Done()
	return nil
}

func TestWaitForCerts(t *testing.T) {
	inner := &recordingServer{Server: webhook.NewServer(webhook.Options{}), started: make(chan struct{})}
	ready := make(chan struct{})
	srv := WaitForCerts(inner, ready)
	if srv.NeedLeaderElection() {
		t.Fatal("webhook server must run on every replica")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()

	select {
	case <-inner.started:
		t.Fatal("server started before the certificates were ready")
	case <-time.After(100 * time.Millisecond):
	}
	close(ready)
	select {
	case <-inner.started:
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start once ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitForCertsStopsWhileWaiting(t *testing.T) {
	inner := &recordingServer{Server: webhook.NewServer(webhook.Options{}), started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitForCerts(inner, make(chan struct{})).Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inner.started:
		t.Fatal("started although never ready")
	default:
	}
}
