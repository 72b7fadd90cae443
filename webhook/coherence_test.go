package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// A Volcano Job whose task template names a scheduler keeps its Job-level schedulerName unset: the
// policy's scheduler is not patched in, and the warning names the default and the task's scheduler.
func TestVolcanoJobTaskSchedulerSkipsPolicyScheduler(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	in := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{
		Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "volcano"}}}}}}
	var out batchv1alpha1.Job
	resp := admit(t, d.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Create, in, nil), &out)
	assert.True(t, resp.Allowed)
	assert.Empty(t, out.Spec.SchedulerName, "the policy's scheduler was patched in although the task names volcano")
	assert.Equal(t, "team-a", out.Spec.Queue, "the other defaults apply")
	wantWarning(t, resp, "hyperbatch: spec.schedulerName (schedulerName hyperbatch-scheduler from WorkloadPolicy team-a) was not defaulted: "+
		`it would contradict spec.tasks[0].template.spec.schedulerName "volcano"`)
	for _, w := range resp.Warnings {
		assert.NotContains(t, w, "spec.schedulerName=")
	}
}
