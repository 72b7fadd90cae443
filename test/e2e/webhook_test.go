//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// The whole admission chain of a deployed hyperbatch: a WorkloadPolicy governs a namespace, the
// manager opts the namespace in to the Pod webhook, and a bare Pod and a Volcano Job created there
// get the policy's queue, priority and scheduler through the real apiserver calling the webhook over
// TLS with the manager's self-managed certificate; the Pod is then bound by hyperbatch-scheduler.
func TestPolicyDefaultsReachWorkloads(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	ensureQueue(t, "team-e2e") // Volcano's job validation refuses a Job whose queue is missing
	ensureQueue(t, "research") // so that the denial below is ours (allowedQueues), not Volcano's "queue not found"
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + ns}, Value: 1000}
	if err := c.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pc) })
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-defaults-" + ns}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Defaults:          hbv1.PolicyDefaults{Queue: "team-e2e", PriorityClassName: pc.Name, SchedulerName: "hyperbatch-scheduler"},
		AllowedQueues:     []string{"team-e2e", "shared"},
	}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	e2efw.Poll(t, 30*time.Second, "the manager to opt the namespace in to the Pod webhook", func(ctx context.Context) (bool, error) {
		var n corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return false, err
		}
		return n.Labels[hbv1.PodWebhookLabel] == hbv1.PodWebhookLabelEnabled, nil
	})
	// The webhook reads policies from its informer: retry until it has seen the new one.
	var pod *corev1.Pod
	e2efw.Poll(t, 30*time.Second, "a Pod defaulted by the webhook", func(ctx context.Context) (bool, error) {
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "bare-", Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{e2efw.Workload().RunningContainer("pause", 10*time.Minute)}}}
		e2efw.Workload().Apply(&pod.Spec)
		if err := c.Create(ctx, pod); err != nil {
			return false, err
		}
		if pod.Annotations[defaults.QueueNameAnnotation] == "team-e2e" {
			return true, nil
		}
		_ = c.Delete(ctx, pod)
		return false, nil
	})
	if pod.Spec.PriorityClassName != pc.Name || pod.Spec.Priority == nil || *pod.Spec.Priority != 1000 {
		t.Errorf("pod priority = %q/%v, want %s/1000", pod.Spec.PriorityClassName, pod.Spec.Priority, pc.Name)
	}
	if pod.Spec.SchedulerName != "hyperbatch-scheduler" {
		t.Errorf("pod schedulerName = %q, want hyperbatch-scheduler", pod.Spec.SchedulerName)
	}
	if got := pod.Annotations[hbv1.DefaultedByAnnotation]; !strings.Contains(got, p.Name) {
		t.Errorf("defaulted-by annotation %q does not name policy %s", got, p.Name)
	}
	e2efw.Poll(t, 60*time.Second, "the defaulted Pod to run", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	})

	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns}, Spec: batchv1alpha1.JobSpec{
		MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: e2efw.Workload().Image}}}}}}}}
	e2efw.Workload().Apply(&job.Spec.Tasks[0].Template.Spec)
	if err := c.Create(ctx, job); err != nil {
		t.Fatalf("create Volcano Job: %v", err)
	}
	if job.Spec.Queue != "team-e2e" || job.Spec.PriorityClassName != pc.Name {
		t.Errorf("Volcano Job queue/priority = %q/%q, want team-e2e/%s", job.Spec.Queue, job.Spec.PriorityClassName, pc.Name)
	}
	bad := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, Spec: batchv1alpha1.JobSpec{
		Queue: "research", MinAvailable: 1, Tasks: job.Spec.Tasks}}
	err := c.Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "research") || !strings.Contains(err.Error(), "team-e2e") {
		t.Errorf("a Volcano Job in a queue outside allowedQueues: want a denial naming the queue and the allowed ones, got %v", err)
	}
}
