package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// The hot path: one CREATE that fills every default, and one that finds nothing to do.
func BenchmarkMutateVolcanoJobCreate(b *testing.B) {
	d := testDeps(b, teamA(), nsA)
	h := d.volcanoJobMutator()
	req := request(b, KindVolcanoJob, admissionv1.Create, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 4, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}}}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); len(resp.Patches) == 0 {
			b.Fatal("no patch")
		}
	}
}

func BenchmarkValidateVolcanoJobCreate(b *testing.B) {
	d := testDeps(b, teamA(), nsA)
	h := d.volcanoJobValidator()
	req := request(b, KindVolcanoJob, admissionv1.Create, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"},
		Spec: batchv1alpha1.JobSpec{Queue: "team-a"}}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); !resp.Allowed {
			b.Fatal("denied")
		}
	}
}
