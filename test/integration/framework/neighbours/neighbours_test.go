// Package neighbours checks the framework's neighbour helpers against a real kube-apiserver: Volcano's
// controller-manager turns a Volcano Job into a PodGroup, the JobSet controller turns a JobSet into
// batch/v1 Jobs, and both stop cleanly.
package neighbours

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var (
	env *framework.Env
	kc  string
)

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.Start(framework.Options{}); err != nil {
		_, _ = os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	dir, _ := os.MkdirTemp("", "neighbours-")
	kc = filepath.Join(dir, "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kc); err != nil {
		_ = env.Stop()
		_, _ = os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func start(t *testing.T, fn func(context.Context, framework.NeighbourOptions) (*framework.Process, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := fn(ctx, framework.NeighbourOptions{Kubeconfig: kc, LogDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.LogTail(40))
		}
		assert.NoError(t, p.Stop(), "stop %s", p.Name)
		assert.True(t, p.Exited())
	})
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "nb-"}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	return ns.Name
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond), "waiting for %s", what)
}

func TestVolcanoControllersCreatePodGroup(t *testing.T) {
	start(t, framework.StartVolcanoControllers)
	ns := namespace(t)
	// Volcano's job controller reads the Job's Queue before it creates the PodGroup.
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q-" + ns}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}}
	require.NoError(t, env.Client.Create(context.Background(), q))
	podSpec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}, Spec: batchv1alpha1.JobSpec{
		SchedulerName: "volcano", Queue: q.Name, MinAvailable: 2,
		Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 2, Template: corev1.PodTemplateSpec{Spec: podSpec}}}}}
	require.NoError(t, env.Client.Create(context.Background(), job))
	eventually(t, "Volcano's job controller to create the Job's PodGroup", func(ctx context.Context) (bool, error) {
		var pgs schedulingv1beta1.PodGroupList
		if err := env.Client.List(ctx, &pgs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, pg := range pgs.Items {
			if metav1.IsControlledBy(&pg, job) && pg.Spec.MinMember == 2 {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestJobSetControllerCreatesJobs(t *testing.T) {
	start(t, framework.StartJobSetController)
	ns := namespace(t)
	podSpec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
	rj := func(name string, replicas int32) jobsetv1alpha2.ReplicatedJob {
		return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{Spec: podSpec}}}}
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pipeline"}, Spec: jobsetv1alpha2.JobSetSpec{
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{rj("driver", 1), rj("workers", 2)}}}
	require.NoError(t, env.Client.Create(context.Background(), js))
	require.NotNil(t, js.Spec.SuccessPolicy, "JobSet's defaulting webhook (registered by StartJobSetController) did not run")
	eventually(t, "the JobSet controller to create 3 Jobs", func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(jobs.Items) == 3, nil
	})
}
