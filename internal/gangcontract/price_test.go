package gangcontract

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

const gpu = corev1.ResourceName("nvidia.com/gpu")

func task(name string, replicas int32, minAvailable *int32, class string, req, lim corev1.ResourceList) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, MinAvailable: minAvailable,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: class,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}}}}
}

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func i32(v int32) *int32 { return &v }

func sameList(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for n, q := range want {
		g, ok := got[n]
		if !ok || g.Cmp(q) != 0 {
			t.Fatalf("%s: %s is %v, want %v (got %v)", what, n, got[n], q.String(), got)
		}
	}
}

// The README's way to write GPUs: only in limits. Volcano's minResources (quota usage of the
// template's requests) has none; the price counts them as the pods will request them.
func TestPriceCountsLimitOnlyGPUs(t *testing.T) {
	job := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{MinAvailable: 2, Tasks: []batchv1alpha1.TaskSpec{
		task("worker", 2, nil, "", rl("cpu", "1"), rl("nvidia.com/gpu", "4")),
	}}}
	volcanoMin := rl("cpu", "2", "requests.cpu", "2", "pods", "2", "count/pods", "2")
	got := Price(&volcanoMin, job, nil)
	sameList(t, "price", got, rl("cpu", "2", "requests.cpu", "2", "pods", "2", "count/pods", "2", "nvidia.com/gpu", "8"))
	if _, ok := volcanoMin[gpu]; ok {
		t.Fatal("Price changed its input")
	}
	// No owning Job: minResources is the price.
	sameList(t, "price without a Job", Price(&volcanoMin, nil, nil), volcanoMin)
	if Price(nil, nil, nil) != nil {
		t.Fatal("no minResources and no Job: want nil")
	}
	// minResources above the effective sum is kept.
	high := rl("nvidia.com/gpu", "16")
	sameList(t, "higher minResources", Price(&high, job, nil), rl("nvidia.com/gpu", "16", "cpu", "2"))
}

// The pods counted follow Volcano's job controller: tasks by priority, minAvailable first.
func TestVolcanoJobRequestsCountsVolcanosPods(t *testing.T) {
	prio := func(c string) int32 { return map[string]int32{"high": 100}[c] }
	master := task("master", 1, i32(1), "", nil, rl("nvidia.com/gpu", "1")) // Volcano's webhook sets a task's minAvailable
	worker := task("worker", 4, i32(2), "high", rl("cpu", "1"), rl("nvidia.com/gpu", "8"))
	for _, tc := range []struct {
		name         string
		minAvailable int32
		want         corev1.ResourceList
	}{
		// 3 = 1 (master) + 2 (worker minAvailable): each task's minAvailable.
		{"task minAvailable", 3, rl("nvidia.com/gpu", "17", "cpu", "2")},
		// 5: task minAvailable (3), then the other replicas by priority: two more workers.
		{"filled up by priority", 5, rl("nvidia.com/gpu", "33", "cpu", "4")},
		// 1 < 3: the first pod by priority (a worker, PriorityClass high).
		{"first pods by priority", 1, rl("nvidia.com/gpu", "8", "cpu", "1")},
	} {
		job := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{MinAvailable: tc.minAvailable,
			Tasks: []batchv1alpha1.TaskSpec{master, worker}}}
		sameList(t, tc.name, VolcanoJobRequests(job, prio), tc.want)
	}
}

func TestEffectiveRequests(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "3")}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m"), Limits: rl("cpu", "1", "nvidia.com/gpu", "2")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "1", "memory", "1Gi")}},
		},
		Overhead: rl("memory", "100Mi"),
	}
	// cpu: max(init 3, 0.5) = 3; gpu 2+1; memory 1Gi + overhead.
	sameList(t, "effective", EffectiveRequests(spec), rl("cpu", "3", "nvidia.com/gpu", "3", "memory", "1124Mi"))
	if spec.Containers[1].Resources.Requests != nil {
		t.Fatal("EffectiveRequests changed its input")
	}
}
