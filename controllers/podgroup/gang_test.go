package podgroup

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func rjob(name string, reps int32, par, comp *int32, spec corev1.PodSpec) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: reps, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Parallelism: par, Completions: comp, Template: corev1.PodTemplateSpec{Spec: spec}}}}
}

func jobset(ann map[string]string, rjs ...jobsetv1alpha2.ReplicatedJob) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Annotations: ann},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: rjs}}
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func TestMinMember(t *testing.T) {
	one := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	for _, tc := range []struct {
		name    string
		js      *jobsetv1alpha2.JobSet
		want    int32
		wantErr string
	}{
		{"defaults: one pod per job", jobset(nil, rjob("a", 4, nil, nil, one)), 4, ""},
		{"parallelism", jobset(nil, rjob("a", 4, ptr.To[int32](8), nil, one)), 32, ""},
		{"completions below parallelism", jobset(nil, rjob("a", 2, ptr.To[int32](8), ptr.To[int32](3), one)), 6, ""},
		{"completions above parallelism", jobset(nil, rjob("a", 2, ptr.To[int32](4), ptr.To[int32](100), one)), 8, ""},
		{"completions only", jobset(nil, rjob("a", 3, nil, ptr.To[int32](5), one)), 3, ""},
		{"parallelism zero", jobset(nil, rjob("a", 3, ptr.To[int32](0), nil, one)), 0, ""},
		{"sum over replicatedJobs", jobset(nil, rjob("leader", 1, nil, nil, one), rjob("workers", 4, ptr.To[int32](8), ptr.To[int32](8), one)), 33, ""},
		{"annotation overrides", jobset(map[string]string{MinMemberAnnotation: "5"}, rjob("a", 4, ptr.To[int32](8), nil, one)), 5, ""},
		{"bad annotation", jobset(map[string]string{MinMemberAnnotation: "many"}, rjob("a", 4, nil, nil, one)), 0, MinMemberAnnotation},
		{"zero annotation", jobset(map[string]string{MinMemberAnnotation: "0"}, rjob("a", 4, nil, nil, one)), 0, "positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MinMember(tc.js)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	lr := corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, DefaultRequest: rl("cpu", "100m"), Default: rl("cpu", "1", "memory", "1Gi")},
		{Type: corev1.LimitTypePod, Max: rl("cpu", "64")},
	}}}
	kata := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m", "memory", "120Mi")}}
	adm := Admission{LimitRanges: []corev1.LimitRange{lr}, RuntimeClasses: map[string]*nodev1.RuntimeClass{"kata": kata, "runc": {Handler: "runc"}}}

	for _, tc := range []struct {
		name    string
		adm     Admission
		spec    corev1.PodSpec
		want    corev1.ResourceList
		wantErr string
	}{
		{"no admission: sum of app containers", Admission{}, corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", rl("cpu", "1"), nil), ctr("b", rl("cpu", "2", "memory", "1Gi"), nil)}}, rl("cpu", "3", "memory", "1Gi"), ""},
		{"limit without request becomes the request", Admission{}, corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", nil, rl("cpu", "2"))}}, rl("cpu", "2"), ""},
		{"LimitRange: defaultRequest for cpu, default limit for memory", adm, corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", nil, nil)}}, rl("cpu", "100m", "memory", "1Gi"), ""},
		{"LimitRange never overrides a user request or limit", adm, corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", rl("cpu", "3"), rl("memory", "2Gi"))}}, rl("cpu", "3", "memory", "2Gi"), ""},
		{"init container larger than the app containers wins", Admission{}, corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("init", rl("cpu", "4"), nil)},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "1"), nil), ctr("b", rl("cpu", "1"), nil)}}, rl("cpu", "4"), ""},
		{"sidecar added to the app containers", Admission{}, corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}}},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "1"), nil)}}, rl("cpu", "1500m"), ""},
		{"init after a sidecar counts the sidecar", Admission{}, corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
				ctr("init", rl("cpu", "3"), nil)},
			Containers: []corev1.Container{ctr("a", rl("cpu", "1"), nil)}}, rl("cpu", "4"), ""},
		{"LimitRange applies to init containers too", adm, corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("init", nil, nil)},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "50m"), nil)}}, rl("cpu", "100m", "memory", "1Gi"), ""},
		{"RuntimeClass overhead added", adm, corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Containers: []corev1.Container{
			ctr("a", rl("cpu", "1", "memory", "1Gi"), nil)}}, rl("cpu", "1250m", "memory", "1144Mi"), ""},
		{"RuntimeClass without overhead", adm, corev1.PodSpec{RuntimeClassName: ptr.To("runc"), Containers: []corev1.Container{
			ctr("a", rl("cpu", "1", "memory", "1Gi"), nil)}}, rl("cpu", "1", "memory", "1Gi"), ""},
		{"unknown RuntimeClass", adm, corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{ctr("a", nil, nil)}}, nil, `runtimeClassName "gvisor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.adm.PodRequests(&corev1.PodTemplateSpec{Spec: tc.spec})
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assertResources(t, tc.want, got)
		})
	}
}

func TestLimitRangeDefaultLimitIsRequestWithoutDefaultRequest(t *testing.T) {
	// As a LimitRange built in memory, before the apiserver defaults defaultRequest from default.
	adm := Admission{LimitRanges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Default: rl("memory", "512Mi")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
			{Type: corev1.LimitTypeContainer, DefaultRequest: rl("memory", "256Mi")}}}}}}
	got, err := adm.PodRequests(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}})
	require.NoError(t, err)
	// LimitRange "a" comes first by name and sets the request.
	assertResources(t, rl("memory", "256Mi"), got)
}

func TestMinResources(t *testing.T) {
	kata := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "100m")}}
	adm := Admission{RuntimeClasses: map[string]*nodev1.RuntimeClass{"kata": kata}}
	worker := corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Containers: []corev1.Container{ctr("w", rl("cpu", "1", "nvidia.com/gpu", "8"), nil)}}
	leader := corev1.PodSpec{Containers: []corev1.Container{ctr("l", rl("cpu", "2"), nil)}}
	js := jobset(nil, rjob("leader", 1, nil, nil, leader), rjob("workers", 4, ptr.To[int32](8), ptr.To[int32](8), worker), rjob("idle", 2, ptr.To[int32](0), nil, worker))
	got, err := MinResources(js, adm)
	require.NoError(t, err)
	// 2 + 32 × 1.1 cpu; 32 × 8 GPUs; the idle replicatedJob runs no pods.
	assertResources(t, rl("cpu", "37200m", "nvidia.com/gpu", "256"), got)

	js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.RuntimeClassName = ptr.To("missing")
	_, err = MinResources(js, adm)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.replicatedJobs[1] (workers).template.spec.template.spec.runtimeClassName")

	none, err := MinResources(jobset(nil, rjob("a", 1, nil, nil, corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}})), Admission{})
	require.NoError(t, err)
	assert.Nil(t, none)
}

func assertResources(t *testing.T, want, got corev1.ResourceList) {
	t.Helper()
	assert.Len(t, got, len(want), "resources: %v", got)
	for name, q := range want {
		g, ok := got[name]
		if assert.True(t, ok, "missing %s in %v", name, got) {
			assert.Zero(t, q.Cmp(g), "%s: want %s, got %s", name, q.String(), g.String())
		}
	}
}

// JobSet's own manifests (the KEPs in its Go module) that start their pods in stages are no gang
// under a policy's gang default, and the feature is named; the others stay gangs.
func TestStagedStartIsNoGang(t *testing.T) {
	exs, err := builders.JobSetKEPExamples()
	require.NoError(t, err)
	pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "gang"},
		Spec: hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Gang: ptr.To(true)}}}})
	require.NoError(t, err)
	ns := defaults.Namespace{Name: "team-a"}
	var staged, gangs int
	for _, ex := range exs {
		if ex.Err != nil {
			continue // KEP 262's last blocks are not valid YAML
		}
		js := ex.JobSet
		var want string
		for i, rj := range js.Spec.ReplicatedJobs {
			if len(rj.DependsOn) > 0 {
				want = fmt.Sprintf("spec.replicatedJobs[%d].dependsOn", i)
				break
			}
		}
		if want == "" && js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobsetv1alpha2.InOrder && len(js.Spec.ReplicatedJobs) > 1 {
			want = "startupPolicyOrder: InOrder"
		}
		got := defaults.JobSetGangBlocked(js, ns, pols)
		if want == "" {
			gangs++
			assert.Empty(t, got, ex.Source)
			assert.True(t, IsGang(js, ns, pols), "%s is a gang", ex.Source)
			continue
		}
		staged++
		assert.Contains(t, got, want, ex.Source)
		assert.False(t, IsGang(js, ns, pols), "%s must not be a gang", ex.Source)
		assert.Empty(t, defaults.JobSetGangBlocked(js, ns, nil), "%s: no gang wanted, nothing blocked", ex.Source)
	}
	assert.GreaterOrEqual(t, staged, 5, "the KEPs show InOrder and dependsOn JobSets")
	assert.GreaterOrEqual(t, gangs, 3, "the KEPs show plain JobSets")

	one := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	excl := jobset(map[string]string{jobsetv1alpha2.ExclusiveKey: "cloud.google.com/gke-nodepool"}, rjob("w", 2, ptr.To[int32](4), nil, one))
	assert.Contains(t, defaults.JobSetGangBlocked(excl, ns, pols), "exclusive placement")
	onTemplate := jobset(nil, rjob("w", 2, ptr.To[int32](4), nil, one))
	onTemplate.Spec.ReplicatedJobs[0].Template.Annotations = map[string]string{jobsetv1alpha2.ExclusiveKey: "rack"}
	assert.Contains(t, defaults.JobSetGangBlocked(onTemplate, ns, pols), "spec.replicatedJobs[0].template")
	// With the node-selector strategy JobSet's pod webhook does not hold followers back: a gang.
	excl.Annotations[jobsetv1alpha2.NodeSelectorStrategyKey] = "true"
	assert.Empty(t, defaults.JobSetGangBlocked(excl, ns, pols))
	assert.True(t, IsGang(excl, ns, pols))
	// InOrder with a single replicatedJob starts everything at once: a gang.
	single := jobset(nil, rjob("w", 2, nil, nil, one))
	single.Spec.StartupPolicy = &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.InOrder}
	assert.True(t, IsGang(single, ns, pols))
}
