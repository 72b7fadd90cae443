//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// The deployed manager splits a HyperJob into Volcano Jobs and PropagationPolicies, and the cluster's
// garbage collector removes them all when the HyperJob is deleted.
func TestHyperJobChildrenLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns}, Spec: trainingv1alpha1.HyperJobSpec{
		ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "trainer", Replicas: 3, ClusterNames: []string{"member-a", "member-b"},
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: e2efw.Workload().Image}}}}}}}}},
	}}
	if err := c.Create(ctx, hj); err != nil {
		t.Fatal(err)
	}
	count := func(ctx context.Context) (int, int, error) {
		var jobs batchv1alpha1.JobList
		var pps policyv1alpha1.PropagationPolicyList
		sel := client.MatchingLabels{"volcano.sh/hyperjob-name": hj.Name}
		if err := c.List(ctx, &jobs, client.InNamespace(ns), sel); err != nil {
			return 0, 0, err
		}
		if err := c.List(ctx, &pps, client.InNamespace(ns), sel); err != nil {
			return 0, 0, err
		}
		return len(jobs.Items), len(pps.Items), nil
	}
	e2efw.Poll(t, 60*time.Second, "3 Volcano Jobs and 3 PropagationPolicies", func(ctx context.Context) (bool, error) {
		j, p, err := count(ctx)
		return j == 3 && p == 3, err
	})
	var job batchv1alpha1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llm-trainer-0"}, &job); err != nil {
		t.Fatalf("child llm-trainer-0: %v", err)
	}
	if ref := metav1.GetControllerOf(&job); ref == nil || ref.Kind != "HyperJob" || ref.Name != hj.Name {
		t.Errorf("child's controller reference = %+v, want HyperJob %s", ref, hj.Name)
	}
	if err := c.Delete(ctx, hj); err != nil {
		t.Fatal(err)
	}
	e2efw.Poll(t, 60*time.Second, "the garbage collector to remove every child", func(ctx context.Context) (bool, error) {
		j, p, err := count(ctx)
		return j == 0 && p == 0, err
	})
}
