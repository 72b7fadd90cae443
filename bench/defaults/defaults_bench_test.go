// Package defaults_test benchmarks the WorkloadPolicy defaults engine on the admission hot path: the
// cost of defaulting one Pod and one Volcano Job as the number of policies grows. Compare the
// policies=1 and policies=1000 rows of one run (`make bench`) as a ratio.
package defaults_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func policies(b *testing.B, n int) *defaults.Policies {
	b.Helper()
	list := make([]hbv1.WorkloadPolicy, n)
	for i := range list {
		list[i] = hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%04d", i)}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", i)}},
			Weight:            int32(i % 7),
			Defaults:          hbv1.PolicyDefaults{Queue: fmt.Sprintf("q%d", i), PriorityClassName: "batch"},
		}}
	}
	p, err := defaults.NewPolicies(list)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkPodDefaults(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			pols := policies(b, n)
			ns := defaults.Namespace{Name: "ml", Labels: map[string]string{"team": "t0"}}
			tmpl := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pod := tmpl.DeepCopy()
				if r := defaults.Pod(pod, ns, pols); !r.Changed() {
					b.Fatal("pod was not defaulted")
				}
			}
		})
	}
}

func BenchmarkVolcanoJobDefaults(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			pols := policies(b, n)
			ns := defaults.Namespace{Name: "ml", Labels: map[string]string{"team": "t0"}}
			tmpl := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ml"}, Spec: batchv1alpha1.JobSpec{
				Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 8}}}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				job := tmpl.DeepCopy()
				if r := defaults.VolcanoJob(job, ns, pols); !r.Changed() {
					b.Fatal("job was not defaulted")
				}
			}
		})
	}
}
