package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
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
		if resp := h.Handle(context.Background(), req); len(resp.Patch) == 0 {
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

// benchPolicy and benchNamespace mirror bench/webhook: queue, priorityClassName and schedulerName
// defaults, a namespace the policy governs.
func benchDeps(b testing.TB) *deps {
	pol := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "bench"}},
		Defaults:          hbv1.PolicyDefaults{Queue: "bench", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler"},
		AllowedQueues:     []string{"bench"},
	}}
	ns := namespace("bench", map[string]string{"team": "bench", corev1.LabelMetadataName: "bench"}, nil)
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-normal"}, Value: 1000}
	d := testDeps(b, pol, ns, pc)
	// Namespaces and PriorityClasses from informer stores, as Setup wires them.
	d.namespaces, d.priorityClasses = storeWith(b, ns), storeWith(b, pc)
	return d
}

func storeWith(b testing.TB, objs ...client.Object) store {
	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		if err := s.Add(o); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func benchPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
}

func BenchmarkMutatePodCreate(b *testing.B) {
	h := benchDeps(b).podMutator()
	req := request(b, KindPod, admissionv1.Create, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"},
		Spec: benchPodSpec()}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); len(resp.Patch) == 0 {
			b.Fatal("no patch")
		}
	}
}

func BenchmarkMutateVolcanoJobCreateBench(b *testing.B) {
	h := benchDeps(b).volcanoJobMutator()
	req := request(b, KindVolcanoJob, admissionv1.Create, &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "bench"},
		Spec: batchv1alpha1.JobSpec{MinAvailable: 8, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 8,
			Template: corev1.PodTemplateSpec{Spec: benchPodSpec()}}}}}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); len(resp.Patch) == 0 {
			b.Fatal("no patch")
		}
	}
}
