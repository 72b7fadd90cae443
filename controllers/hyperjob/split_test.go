package hyperjob

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

const gpu = "nvidia.com/gpu"

// container asks for n GPUs as a limit (requests default to it), or as a request when req is set.
func container(name string, n string, req bool) corev1.Container {
	c := corev1.Container{Name: name, Image: "x"}
	if n == "" {
		return c
	}
	rl := corev1.ResourceList{gpu: resource.MustParse(n)}
	if req {
		c.Resources.Requests = rl
	} else {
		c.Resources.Limits = rl
	}
	return c
}

func task(name string, replicas int32, gpus string) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{Name: name, Replicas: replicas, Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{container("main", gpus, false)}}}}
}

func staticRJ(accel int, tasks ...batchv1alpha1.TaskSpec) *trainingv1alpha1.ReplicatedJob {
	return &trainingv1alpha1.ReplicatedJob{Name: "trainer", Replicas: 1,
		SplitPolicy:  &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeStatic, Accelerators: ptr.To(accel), AcceleratorType: ptr.To(gpu)},
		TemplateSpec: batchv1alpha1.JobSpec{Tasks: tasks}}
}

func TestPodDemand(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("sidecar", "1", true)
	sidecar.RestartPolicy = &always
	cases := []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"limits only", corev1.PodSpec{Containers: []corev1.Container{container("a", "2", false), container("b", "3", false)}}, 5},
		{"request wins over limit", corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{gpu: resource.MustParse("1")}, Limits: corev1.ResourceList{gpu: resource.MustParse("1")}}}}}, 1},
		{"no accelerator", corev1.PodSpec{Containers: []corev1.Container{container("a", "", false)}}, 0},
		{"init container larger than app", corev1.PodSpec{InitContainers: []corev1.Container{container("init", "8", false)},
			Containers: []corev1.Container{container("a", "2", false)}}, 8},
		{"sidecars add to app and to later init containers", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container("init", "4", false)},
			Containers:     []corev1.Container{container("a", "2", false)}}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodDemand(&tc.spec, gpu)
			if err != nil || got != tc.want {
				t.Fatalf("PodDemand = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := PodDemand(&corev1.PodSpec{Containers: []corev1.Container{container("a", "500m", false)}}, gpu); err == nil ||
		!strings.Contains(err.Error(), "not a whole number") {
		t.Fatalf("fractional GPU: err = %v, want 'not a whole number'", err)
	}
}

func TestSplitReplicatedJob(t *testing.T) {
	t.Run("no split policy: one part, template unchanged", func(t *testing.T) {
		rj := &trainingv1alpha1.ReplicatedJob{Name: "r", Replicas: 3, TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 4, "1")}}}
		s, ref := SplitReplicatedJob(rj)
		if ref != nil || s.Parts != 1 || s.Template.Tasks[0].Replicas != 4 {
			t.Fatalf("got %+v, %v", s, ref)
		}
	})
	t.Run("workers divided, coordinator copied, job minAvailable scaled", func(t *testing.T) {
		// 1 master (no GPU) + 16 workers × 8 GPUs = 128 GPUs; children of 32 GPUs → 4 parts of 4 workers.
		rj := staticRJ(32, task("master", 1, ""), task("worker", 16, "8"))
		rj.TemplateSpec.MinAvailable = 17
		rj.TemplateSpec.Tasks[1].MinAvailable = ptr.To[int32](16)
		rj.TemplateSpec.MinSuccess = ptr.To[int32](9) // 1 + 8 → 1 + 2
		s, ref := SplitReplicatedJob(rj)
		if ref != nil {
			t.Fatal(ref)
		}
		if s.Parts != 4 || s.Demand != 128 {
			t.Fatalf("parts=%d demand=%d, want 4 and 128", s.Parts, s.Demand)
		}
		if got := s.Template.Tasks[0].Replicas; got != 1 {
			t.Errorf("master replicas = %d, want 1 (copied)", got)
		}
		if got := s.Template.Tasks[1].Replicas; got != 4 {
			t.Errorf("worker replicas = %d, want 4", got)
		}
		if got := *s.Template.Tasks[1].MinAvailable; got != 4 {
			t.Errorf("worker minAvailable = %d, want 4", got)
		}
		if s.Template.MinAvailable != 5 || *s.Template.MinSuccess != 3 {
			t.Errorf("job minAvailable=%d minSuccess=%d, want 5 and 3", s.Template.MinAvailable, *s.Template.MinSuccess)
		}
		if rj.TemplateSpec.Tasks[1].Replicas != 16 {
			t.Error("the HyperJob's template was modified")
		}
		// Every child demands exactly the configured accelerators.
		var childDemand int64
		for i := range s.Template.Tasks {
			d, _ := PodDemand(&s.Template.Tasks[i].Template.Spec, gpu)
			childDemand += int64(s.Template.Tasks[i].Replicas) * d
		}
		if childDemand != 32 {
			t.Errorf("child demand = %d, want 32", childDemand)
		}
	})
	t.Run("accelerators equal to the demand: one part", func(t *testing.T) {
		s, ref := SplitReplicatedJob(staticRJ(16, task("w", 2, "8")))
		if ref != nil || s.Parts != 1 || s.Template.Tasks[0].Replicas != 2 {
			t.Fatalf("got %+v, %v", s, ref)
		}
	})

	refusals := []struct {
		name       string
		rj         *trainingv1alpha1.ReplicatedJob
		reason     string
		msgContain string
	}{
		{"demand not a multiple", staticRJ(24, task("w", 8, "8")), ReasonNotDivisible, "64 nvidia.com/gpu in total, which is not a multiple of accelerators=24"},
		{"task replicas do not divide", staticRJ(12, task("a", 3, "4"), task("b", 3, "4")), ReasonNotDivisible, `task "a" has 3 replicas`},
		{"task minAvailable does not divide", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.TemplateSpec.Tasks[0].MinAvailable = ptr.To[int32](3)
			return rj
		}(), ReasonNotDivisible, "minAvailable 3 cannot be divided among 2 children"},
		{"job minAvailable does not divide", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.TemplateSpec.MinAvailable = 3
			return rj
		}(), ReasonNotDivisible, "templateSpec.minAvailable 3"},
		{"no demand", staticRJ(8, task("w", 4, "")), ReasonNoAcceleratorDemand, "requests no nvidia.com/gpu"},
		{"accelerators missing", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.SplitPolicy.Accelerators = nil
			return rj
		}(), ReasonMissingAccelerators, "accelerators > 0"},
		{"type missing", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.SplitPolicy.AcceleratorType = nil
			return rj
		}(), ReasonMissingAcceleratorType, "acceleratorType"},
		{"auto mode with pods of different demand", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 2, "4"), task("x", 4, "2"))
			rj.SplitPolicy.Mode = trainingv1alpha1.SplitModeAuto
			return rj
		}(), ReasonMixedPodDemand, `task "w" requests 4 and task "x" 2 per pod`},
		{"auto mode without acceleratorType", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.SplitPolicy.Mode = trainingv1alpha1.SplitModeAuto
			rj.SplitPolicy.AcceleratorType = nil
			return rj
		}(), ReasonMissingAcceleratorType, "mode auto needs acceleratorType"},
		{"auto mode with a tier by name", func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(8, task("w", 4, "4"))
			rj.SplitPolicy.Mode = trainingv1alpha1.SplitModeAuto
			rj.TemplateSpec.NetworkTopology = &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierName: "leaf"}
			return rj
		}(), ReasonUnsupportedTopology, "highestTierAllowed"},
		{"fractional accelerator", staticRJ(1, task("w", 4, "500m")), ReasonInvalidAcceleratorQuantity, "not a whole number"},
	}
	for _, tc := range refusals {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			_, ref := SplitReplicatedJob(tc.rj)
			if ref == nil {
				t.Fatal("want a refusal")
			}
			if ref.Condition != ConditionSplitPolicyInvalid || ref.Reason != tc.reason || !strings.Contains(ref.Message, tc.msgContain) {
				t.Fatalf("refusal %+v, want reason %s and message containing %q", ref, tc.reason, tc.msgContain)
			}
			if !strings.HasPrefix(ref.Message, `replicatedJob "trainer": `) {
				t.Errorf("message %q does not name the replicatedJob", ref.Message)
			}
		})
	}
}
