package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeControllerManager is a kube-controller-manager (from AssetsDir) running against an Env as
// envtest's admin user. envtest runs no controllers; tests that need garbage collection (foreground
// deletion completes only when the garbage collector removes the foregroundDeletion finalizer) or
// Kubernetes Jobs start one.
type KubeControllerManager struct {
	cmd *exec.Cmd
	dir string
	log lockedBuffer
}

// StartKubeControllerManager starts kube-controller-manager with the named controllers (its
// --controllers values; the garbage collector is always included) and returns once the garbage
// collector has deleted a probe dependent.
func StartKubeControllerManager(env *Env, controllers ...string) (*KubeControllerManager, error) {
	return StartKubeControllerManagerWithFlags(env, nil, controllers...)
}

// StartKubeControllerManagerWithFlags is StartKubeControllerManager with extra flags (for example
// "--feature-gates=...").
func StartKubeControllerManagerWithFlags(env *Env, flags []string, controllers ...string) (*KubeControllerManager, error) {
	dir, err := os.MkdirTemp("", "hyperbatch-kcm-")
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager work directory: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(env.Config, kubeconfig); err != nil {
		return nil, err
	}
	k := &KubeControllerManager{dir: dir}
	k.cmd = exec.Command(filepath.Join(AssetsDir(), "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(append([]string{"garbage-collector-controller"}, controllers...), ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		"--concurrent-gc-syncs=50",
		"--kube-api-qps=500", "--kube-api-burst=1000",
		"--v=1",
	)
	k.cmd.Args = append(k.cmd.Args, flags...)
	k.cmd.Stdout, k.cmd.Stderr = &k.log, &k.log
	if err := k.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", k.cmd.Path, err)
	}
	if err := waitForGarbageCollector(env.Client); err != nil {
		k.Stop()
		return nil, fmt.Errorf("%w\nkube-controller-manager output:\n%s", err, k.LogTail(4000))
	}
	return k, nil
}

// Stop interrupts the process (killing it after 10s) and removes its work directory.
func (k *KubeControllerManager) Stop() {
	_ = k.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = k.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = k.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(k.dir)
}

// LogTail is the last n bytes of the process's output.
func (k *KubeControllerManager) LogTail(n int) string { return Tail(k.log.String(), n) }

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitForGarbageCollector proves the garbage collector works: a ConfigMap owned by a deleted
// ConfigMap must disappear.
func waitForGarbageCollector(c client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-owner-", Namespace: "default"}}
	if err := c.Create(ctx, owner); err != nil {
		return fmt.Errorf("garbage collector probe: %w", err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-dependent-", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := c.Create(ctx, dep); err != nil {
		return fmt.Errorf("garbage collector probe: %w", err)
	}
	if err := c.Delete(ctx, owner); err != nil {
		return fmt.Errorf("garbage collector probe: %w", err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("the garbage collector did not delete a dependent within 90s: %w", err)
	}
	return nil
}

// lockedBuffer is a bytes.Buffer safe for the process's writes and the test's reads at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartJobSetAndJobControllers starts the real JobSet controller (with its webhooks) and
// kube-controller-manager's Job controller against env for one test, and stops both when it ends
// (printing their logs' tails when it failed). envtest has no kubelet: pods the Job controller
// creates stay Pending until the test changes their phase.
func StartJobSetAndJobControllers(t testing.TB, env *Env) {
	t.Helper()
	StartNeighbourForTest(t, env.Config, StartJobSetController, NeighbourOptions{})
	kcm, err := StartKubeControllerManager(env, "job-controller")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(kcm.LogTail(4000))
		}
		kcm.Stop()
	})
}

// StartVolcanoForTest starts Volcano's controller-manager (VolcanoControllers: its job controller,
// PodGroups, Queues, garbage collector) and scheduler (VolcanoSchedulerConfig) against cfg's
// apiserver for one test, and stops both when it ends (printing their logs' tails when it failed).
func StartVolcanoForTest(t testing.TB, cfg *rest.Config) {
	t.Helper()
	StartNeighbourForTest(t, cfg, StartVolcanoControllers, NeighbourOptions{})
	StartNeighbourForTest(t, cfg, StartVolcanoScheduler, NeighbourOptions{})
}

// StartNeighbourForTest starts one neighbour (start: StartVolcanoControllers, StartJobSetController,
// StartTrainerController, ...) against cfg's apiserver for one test, waiting at most 3 minutes for
// it to serve, and stops it when the test ends (printing its log's tail when the test failed). o's
// Kubeconfig and LogDir are a kubeconfig of cfg and a temporary directory when empty.
func StartNeighbourForTest(t testing.TB, cfg *rest.Config, start func(context.Context, NeighbourOptions) (*Process, error), o NeighbourOptions) *Process {
	t.Helper()
	if o.LogDir == "" {
		o.LogDir = t.TempDir()
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = filepath.Join(o.LogDir, "kubeconfig")
		require.NoError(t, WriteKubeconfig(cfg, o.Kubeconfig))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := start(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.LogTail(60))
		}
		assert.NoError(t, p.Stop())
	})
	return p
}
