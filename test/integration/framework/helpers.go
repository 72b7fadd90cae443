package framework

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// Parallel runs fn(0..n-1) on workers goroutines and fails tb with the first error, once all ran.
func Parallel(tb testing.TB, workers, n int, fn func(i int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
}

// TestContext is a context bounded by d and cancelled when the test ends.
func TestContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// DumpLogOnFailure prints the last 20000 bytes of the suite log at path (LogToFile) when the test
// fails; path "" (logs on stderr) prints nothing.
func DumpLogOnFailure(t testing.TB, path string) {
	t.Cleanup(func() {
		if !t.Failed() || path == "" {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		t.Logf("log tail (%s):\n%s", path, b)
	})
}

var nsSeq struct {
	sync.Mutex
	n int
}

// SequencedNamespace creates the namespace <prefix>-<n> (a process-wide sequence keeps -count=N runs
// apart, as no namespace controller finalizes deletion in envtest); its pods are force-deleted when
// the test ends.
func SequencedNamespace(t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	nsSeq.Lock()
	nsSeq.n++
	name := fmt.Sprintf("%s-%d", prefix, nsSeq.n)
	nsSeq.Unlock()
	if _, err := cs.CoreV1().Namespaces().Create(TestContext(t, 30*time.Second), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	})
	return name
}

// CreateReadyNode creates node (see builders.MakeNode) and, playing the kubelet and the node
// lifecycle controller that envtest lacks, reports it Ready with capacity and removes the not-ready
// taint TaintNodesByCondition adds on creation. The node is deleted when the test ends.
func CreateReadyNode(t testing.TB, cs kubernetes.Interface, node *corev1.Node, capacity corev1.ResourceList) {
	t.Helper()
	ctx := TestContext(t, 30*time.Second)
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", node.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
	})
	created.Status = builders.ReadyStatus(capacity)
	updated, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("node %s status: %v", node.Name, err)
	}
	updated.Spec.Taints = node.Spec.Taints // the caller's own, without the not-ready taint the apiserver adds on create
	if _, err := cs.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s taints: %v", node.Name, err)
	}
}

// Warnings records the admission warnings a client receives (a rest.WarningHandler).
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// Take returns the warnings received since the last Take and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// WarningClient is a client on cfg whose admission warnings the test reads from the Warnings.
func WarningClient(t testing.TB, cfg *rest.Config) (client.Client, *Warnings) {
	t.Helper()
	w := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler, cfg.WarningHandlerWithContext = w, nil
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// Unthrottled is a copy of cfg with client-side rate limiting raised far above anything a test
// needs, so it measures the controller, not the token bucket.
func Unthrottled(cfg *rest.Config) *rest.Config {
	cp := rest.CopyConfig(cfg)
	cp.QPS, cp.Burst = 5000, 10000
	return cp
}

// EventsAbout lists the core Events in ns about the object of kind and name with the reason.
func EventsAbout(ctx context.Context, c client.Reader, ns, kind, name, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the Events of %s: %w", ns, err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}
