package defaults

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func karmadaSample(t *testing.T, rel string) *policyv1alpha1.PropagationPolicy {
	t.Helper()
	pp, err := builders.KarmadaSample(rel, "a")
	require.NoError(t, err)
	return pp
}

func maxClustersPolicy(t *testing.T, n int32) *Policies {
	return mustPolicies(t, policy("one-cluster", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.Propagation = &hbv1.Propagation{MaxClusters: ptr.To(n)}
	}))
}

// Karmada's nginx sample divides a Deployment Weighted 1:1 over member1 and member2. A policy's
// maxClusters 1 would cap it to one cluster and void that division, so the cap is skipped, and the
// skip names both the default and the user's division. With maxClusters 2 the cap agrees and is
// filled. Karmada's guestbook sample names one cluster and no division: the cap is filled.
func TestSpreadCapSkippedOnKarmadaSamples(t *testing.T) {
	nginx := karmadaSample(t, "nginx/propagationpolicy.yaml")
	require.Len(t, nginx.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList, 2, "the sample's division")

	pp := nginx.DeepCopy()
	res := PropagationPolicy(pp, nsA, maxClustersPolicy(t, 1))
	assert.Empty(t, pp.Spec.Placement.SpreadConstraints, "a spread cap of 1 was added to a 2-cluster weighted division")
	assert.False(t, res.Changed())
	require.Len(t, res.Skips, 1)
	s := res.Skips[0]
	assert.Equal(t, "spec.placement.spreadConstraints", s.Path)
	assert.Equal(t, FieldSpreadConstraints, s.Field)
	assert.Equal(t, Source{Kind: SourcePolicy, Name: "one-cluster"}, s.Source)
	assert.Equal(t, "spec.placement.spreadConstraints (maxClusters 1 from WorkloadPolicy one-cluster) was not defaulted: it would contradict "+
		"the Weighted division in spec.placement.replicaScheduling.weightPreference.staticWeightList, which names 2 clusters (member1, member2)", s.String())

	pp = nginx.DeepCopy()
	res = PropagationPolicy(pp, nsA, maxClustersPolicy(t, 2))
	assert.Empty(t, res.Skips)
	assert.Equal(t, []string{"spec.placement.spreadConstraints"}, res.Paths())
	assert.Equal(t, 2, pp.Spec.Placement.SpreadConstraints[0].MaxGroups)

	guestbook := karmadaSample(t, "guestbook/guestbooks-propagationpolicy.yaml")
	res = PropagationPolicy(guestbook, nsA, maxClustersPolicy(t, 1))
	assert.Empty(t, res.Skips)
	assert.Equal(t, []string{"spec.placement.spreadConstraints"}, res.Paths())
}

// A Duplicated placement over named clusters puts a copy on each: a smaller cap contradicts it. The
// count is taken from the user's placement, not from clusterNames the policy itself fills.
func TestSpreadCapSkippedForDuplicatedNamedClusters(t *testing.T) {
	dup := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
	pp := propagationPolicy(nil, false, policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"x", "y", "x"}}, ReplicaScheduling: dup.DeepCopy()})
	res := PropagationPolicy(pp, nsA, maxClustersPolicy(t, 1))
	require.Len(t, res.Skips, 1)
	assert.Contains(t, res.Skips[0].Conflict, "replicaSchedulingType Duplicated, which names 2 clusters (x, y)")

	pols := mustPolicies(t, policy("p", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.Propagation = &hbv1.Propagation{ClusterNames: []string{"x", "y"}, MaxClusters: ptr.To[int32](1)}
	}))
	pp = propagationPolicy(nil, false, policyv1alpha1.Placement{ReplicaScheduling: dup.DeepCopy()})
	res = PropagationPolicy(pp, nsA, pols)
	assert.Empty(t, res.Skips)
	assert.Equal(t, []string{"spec.placement.clusterAffinity.clusterNames", "spec.placement.spreadConstraints"}, res.Paths())
}

func tierPolicy(t *testing.T) *Policies {
	return mustPolicies(t, policy("rack", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.Queue = "q"
		s.Defaults.NetworkTopology = &hbv1.NetworkTopology{HighestTierAllowed: ptr.To[int32](1)}
	}))
}

// A tier bound is not given to pods pinned to nodes (nodeName, a hostname nodeSelector, a required
// affinity naming nodes); other defaults still are. A preferred affinity or a zone requirement pins
// nothing, so the bound is filled.
func TestTierBoundSkippedOnPinnedPods(t *testing.T) {
	hostTerm := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1", "n2"}}}}
	zoneTerm := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z"}}}}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	for _, tc := range []struct {
		name     string
		spec     corev1.PodSpec
		conflict string // "" when the bound is filled
	}{
		{"nodeName", corev1.PodSpec{NodeName: "n1"}, `spec.nodeName "n1"`},
		{"hostname nodeSelector", corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "n1"}}, `spec.nodeSelector[kubernetes.io/hostname] "n1"`},
		{"required hostname affinity", corev1.PodSpec{Affinity: required(hostTerm)},
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (nodes n1, n2)"},
		{"required metadata.name field", corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n3"}}}})},
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (nodes n3)"},
		{"one term not pinned", corev1.PodSpec{Affinity: required(hostTerm, zoneTerm)}, ""},
		{"zone only", corev1.PodSpec{Affinity: required(zoneTerm)}, ""},
		{"free", corev1.PodSpec{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}, Spec: tc.spec}
			res := Pod(pod, nsA, tierPolicy(t))
			assert.Equal(t, "q", pod.Annotations[QueueNameAnnotation], "the queue default still applies")
			_, hasMode := pod.Annotations[NetworkTopologyModeAnnotation]
			if tc.conflict == "" {
				assert.True(t, hasMode, "the tier bound was not filled")
				assert.Empty(t, res.Skips)
				return
			}
			assert.False(t, hasMode, "a tier bound was added to a pinned pod")
			require.Len(t, res.Skips, 1)
			assert.Equal(t, FieldNetworkTopology, res.Skips[0].Field)
			assert.Equal(t, "networkTopology hard, highestTierAllowed 1", res.Skips[0].Default)
			assert.Equal(t, tc.conflict, res.Skips[0].Conflict)
		})
	}

	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
		{Name: "free"}, {Name: "pinned", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: "n9"}}}}}}
	res := VolcanoJob(job, nsA, tierPolicy(t))
	assert.Nil(t, job.Spec.NetworkTopology, "a tier bound was added to a Job whose task pins nodes")
	require.Len(t, res.Skips, 1)
	assert.Equal(t, "spec.networkTopology (networkTopology hard, highestTierAllowed 1 from WorkloadPolicy rack) was not defaulted: "+
		`it would contradict spec.tasks[1].template.spec.nodeName "n9"`, res.Skips[0].String())
	assert.Equal(t, "q", job.Spec.Queue)
}

// DaemonSet pods and static pods' mirrors are never defaulted, whatever the policy.
func TestPlatformPodsAreNotDefaulted(t *testing.T) {
	pols := mustPolicies(t, teamA())
	for name, meta := range map[string]metav1.ObjectMeta{
		"daemonset": {OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: ptr.To(true)}}},
		"mirror":    {Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "hash"}},
		"node":      {OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u"}}},
	} {
		pod := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}
		before := pod.DeepCopy()
		res := Pod(pod, nsA, pols)
		assert.False(t, res.Changed(), name)
		assert.Equal(t, before, pod, name)
	}
	rs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
		{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}}}
	assert.True(t, Pod(rs, nsA, pols).Changed(), "a ReplicaSet's pod is a workload pod and is defaulted")
}

// A policy's Job-level schedulerName is not given to a Volcano Job (or a HyperJob template) whose
// task templates name another scheduler: Volcano's job controller gives the Job's scheduler only to
// pods that name none, so the gang would go to the policy's scheduler and its pods to theirs. The
// Skip names both; the other defaults still apply. A task naming the policy's own scheduler is no
// contradiction.
func TestTaskSchedulerKeepsJobSchedulerUnset(t *testing.T) {
	pols := mustPolicies(t, teamA())
	task := func(name, scheduler string) batchv1alpha1.TaskSpec {
		return batchv1alpha1.TaskSpec{Name: name, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: scheduler}}}
	}
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{
		Tasks: []batchv1alpha1.TaskSpec{task("ps", ""), task("worker", "volcano")}}}
	res := VolcanoJob(job, nsA, pols)
	assert.Empty(t, job.Spec.SchedulerName, "the policy's scheduler was given to a Job whose task names volcano")
	require.Len(t, res.Skips, 1)
	assert.Equal(t, "spec.schedulerName (schedulerName hyperbatch-scheduler from WorkloadPolicy team-a) was not defaulted: "+
		`it would contradict spec.tasks[1].template.spec.schedulerName "volcano"`, res.Skips[0].String())
	assert.Equal(t, "team-a", job.Spec.Queue, "the other defaults still apply")
	assert.NotContains(t, res.DefaultedBy, FieldSchedulerName)

	same := &batchv1alpha1.Job{Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", "hyperbatch-scheduler")}}}
	res = VolcanoJob(same, nsA, pols)
	assert.Equal(t, "hyperbatch-scheduler", same.Spec.SchedulerName)
	assert.Empty(t, res.Skips)

	hj := &trainingv1alpha1.HyperJob{Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{
		Name: "r", Replicas: 1, TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", "volcano")}}}}}}
	res = HyperJob(hj, nsA, pols)
	assert.Empty(t, hj.Spec.ReplicatedJobs[0].TemplateSpec.SchedulerName)
	require.Len(t, res.Skips, 1)
	assert.Equal(t, "spec.replicatedJobs[0].templateSpec.schedulerName", res.Skips[0].Path)
}
