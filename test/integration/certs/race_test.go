package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/certs"
)

// racingClient lets a test line two rotators up: while armed, its first read of a Secret waits until
// the other rotator has read it too, so both compute certificates from the same state and both try to
// write. It counts the writes the apiserver rejected as lost races.
type racingClient struct {
	client.WithWatch
	armed   atomic.Bool
	barrier *atomic.Pointer[sync.WaitGroup]
	lost    *atomic.Int32
}

func (c *racingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.WithWatch.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*corev1.Secret); ok && c.armed.CompareAndSwap(true, false) {
		wg := c.barrier.Load()
		wg.Done()
		wg.Wait()
	}
	return err
}

func (c *racingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.count(c.WithWatch.Create(ctx, obj, opts...))
}

func (c *racingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.count(c.WithWatch.Update(ctx, obj, opts...))
}

func (c *racingClient) count(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		c.lost.Add(1)
	}
	return err
}

// TestRacingRotatorsConverge runs two replicas' rotators against one Secret. In each round both read
// the same state and write at once: exactly one write wins, the loser re-reads and adopts the winner's
// certificates, and both cert dirs end up identical to the Secret.
func TestRacingRotatorsConverge(t *testing.T) {
	const prefix = "race"
	createWebhookConfigs(t, prefix)
	fc := clocktesting.NewFakeClock(time.Now())
	var barrier atomic.Pointer[sync.WaitGroup]
	var lost atomic.Int32
	dirs := []string{t.TempDir(), t.TempDir()}
	var rotators []*certs.Rotator
	var clients []*racingClient
	for _, dir := range dirs {
		rc := &racingClient{WithWatch: k8s, barrier: &barrier, lost: &lost}
		r, err := certs.New(testConfig(prefix, dir), certs.WithClient(rc), certs.WithClock(fc))
		if err != nil {
			t.Fatal(err)
		}
		rotators, clients = append(rotators, r), append(clients, rc)
	}
	cfg := testConfig(prefix, dirs[0])

	race := func(what string) state {
		t.Helper()
		wg := &sync.WaitGroup{}
		wg.Add(len(clients))
		barrier.Store(wg)
		for _, c := range clients {
			c.armed.Store(true)
		}
		before := lost.Load()
		errs := make([]error, len(rotators))
		var done sync.WaitGroup
		for i, r := range rotators {
			done.Add(1)
			go func() {
				defer done.Done()
				errs[i] = r.Sync(context.Background())
			}()
		}
		done.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: rotator %d: %v", what, i, err)
			}
		}
		if n := lost.Load() - before; n != 1 {
			t.Fatalf("%s: %d writes lost, want exactly 1 (one winner, one adopter)", what, n)
		}
		st := readState(t, cfg.SecretName)
		for _, dir := range dirs {
			for _, k := range []string{certs.CACertKey, certs.TLSCertKey, certs.TLSKeyKey} {
				got, err := os.ReadFile(filepath.Join(dir, k))
				if err != nil || !bytes.Equal(got, st.secret.Data[k]) {
					t.Fatalf("%s: %s in %s is not the winner's (%v)", what, k, dir, err)
				}
			}
		}
		for _, b := range caBundles(t, cfg) {
			if !bytes.Equal(b, st.secret.Data[certs.CACertKey]) {
				t.Fatalf("%s: a webhook entry does not hold the winner's bundle", what)
			}
		}
		return st
	}

	s0 := race("creating the Secret")
	fc.SetTime(certs.RenewAt(s0.serving, 1.0/3, time.Hour).Add(time.Minute))
	s1 := race("renewing the serving cert")
	if sameSerial(s1.serving, s0.serving) {
		t.Fatal("serving cert not renewed")
	}
	fc.SetTime(certs.RenewAt(s0.bundle[0], 1.0/3, time.Hour).Add(time.Minute))
	s2 := race("rotating the CA")
	if len(s2.bundle) != 2 {
		t.Fatalf("bundle holds %d CAs, want 2", len(s2.bundle))
	}

	// The same with both sync loops running: step the clock and let them converge on their own.
	for _, r := range rotators {
		startRotator(t, r)
	}
	fc.Step(cfg.CAOverlap)
	eventually(t, "both replicas serving the step-2 certificate", func() (bool, error) {
		st := readState(t, cfg.SecretName)
		if sameSerial(st.serving, s2.serving) {
			return false, nil
		}
		for _, dir := range dirs {
			got, err := os.ReadFile(filepath.Join(dir, certs.TLSCertKey))
			if err != nil || !bytes.Equal(got, st.secret.Data[certs.TLSCertKey]) {
				return false, err
			}
		}
		return true, nil
	})
}
