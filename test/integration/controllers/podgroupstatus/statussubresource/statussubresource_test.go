// Package statussubresource runs the PodGroup lifecycle controller against a PodGroup CRD that has a
// status subresource (as a CRD generated with a +kubebuilder:subresource:status marker would), where
// a write of the main resource silently drops status: the controller must find /status and use it.
package statussubresource

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroupstatus"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// crdsWithStatusSubresource copies Volcano's Job, PodGroup and Queue CRDs (from `make crds`) into
// dir, turning on the PodGroup status subresource.
func crdsWithStatusSubresource(t *testing.T, dir string) {
	t.Helper()
	src := filepath.Join(framework.RepoRoot(), "_output", "crds", "volcano")
	for _, f := range []string{"batch.volcano.sh_jobs.yaml", "scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh_podgroups.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err, "run 'make crds'")
		if strings.Contains(f, "podgroups") {
			s := string(b)
			require.Contains(t, s, "subresources: {}", "the PodGroup CRD changed shape; update this test")
			b = []byte(strings.Replace(s, "subresources: {}", "subresources:\n      status: {}", 1))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
}

type pathCounter struct {
	mu    sync.Mutex
	paths map[string]int
}

func (p *pathCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/podgroups/") {
			kind := "main"
			if strings.HasSuffix(req.URL.Path, "/status") {
				kind = "status"
			}
			p.mu.Lock()
			p.paths[kind]++
			p.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

func (p *pathCounter) get(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paths[kind]
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestStatusSubresource(t *testing.T) {
	dir := t.TempDir()
	crdsWithStatusSubresource(t, dir)
	env, err := framework.Start(framework.Options{CRDDirs: []string{dir}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	counter := &pathCounter{paths: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.RoundTrip)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	r, err := podgroupstatus.NewReconciler(mgr, podgroupstatus.Options{})
	require.NoError(t, err)
	require.NoError(t, r.SetupWithManager(mgr))
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { stop(); <-done })

	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sub"}}))
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "sub-q"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1,
		Capability: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	require.NoError(t, c.Create(ctx, q))
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "sub", Name: "owner"},
		Spec: batchv1alpha1.JobSpec{SchedulerName: podgroupstatus.DefaultSchedulerName, MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{
			Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}}}
	require.NoError(t, c.Create(ctx, job))
	owner := metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))
	for _, name := range []string{"a", "b"} {
		require.NoError(t, c.Create(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "sub", Name: name, OwnerReferences: []metav1.OwnerReference{*owner}},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1, Queue: "sub-q", MinResources: &corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}))
	}
	phase := func(name string) schedulingv1beta1.PodGroupPhase {
		var pg schedulingv1beta1.PodGroup
		if err := c.Get(ctx, client.ObjectKey{Namespace: "sub", Name: name}, &pg); err != nil {
			return "error: " + schedulingv1beta1.PodGroupPhase(err.Error())
		}
		return pg.Status.Phase
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return phase("a") == schedulingv1beta1.PodGroupInqueue && phase("b") == schedulingv1beta1.PodGroupPending, nil
	}), "a Inqueue and b Pending (a: %s, b: %s)", phase("a"), phase("b"))
	assert.Positive(t, counter.get("status"), "status written through /status")
	// At most the first write went to the main resource, before the controller found the subresource.
	assert.LessOrEqual(t, counter.get("main"), 1, "status patches of the main resource")
}
