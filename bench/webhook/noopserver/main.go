// Command noopserver is the admission benchmark's floor: an HTTPS server whose only webhook, /noop,
// admits every AdmissionReview without a patch. It serves through hyperbatch's review plumbing
// (webhook.NewAdmissionWebhook) and net/http, so it costs what any webhook on this stack costs
// before its handler does anything. BenchmarkAdmissionPeers builds and starts it as a process of
// its own, like the two peers.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

// Path is the no-op webhook's path.
const Path = "/noop"

func main() {
	listen := flag.String("listen", "127.0.0.1:9443", "address to serve HTTPS on")
	certDir := flag.String("cert-dir", "", "directory holding tls.crt and tls.key")
	flag.Parse()
	if err := run(*listen, *certDir); err != nil {
		fmt.Fprintln(os.Stderr, "noopserver:", err)
		os.Exit(1)
	}
}

func run(listen, certDir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the serving certificate from --cert-dir: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, hbwebhook.NewAdmissionWebhook(admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })))
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", listen, err)
	}
	return nil
}
