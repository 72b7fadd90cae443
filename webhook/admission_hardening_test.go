package webhook

import (
	"context"
	"net/http"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// A queue name with spaces around it is refused on every kind, naming the field and the fix, in a
// governed namespace (where the trimmed name is allowed) and in an ungoverned one alike. An
// unchanged padded queue on UPDATE passes (it was admitted before this rule); changing to one is refused.
func TestPaddedQueuesRefused(t *testing.T) {
	d := testDeps(t, teamA(), nsA, namespace("free", nil, nil))
	meta := func(ns string, ann map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "w", Namespace: ns, Annotations: ann}
	}
	qAnn := func(q string) map[string]string { return map[string]string{defaults.QueueNameAnnotation: q} }
	jobTemplate := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{}}}
	for _, ns := range []string{"a", "free"} {
		for _, tc := range []struct {
			kind  Kind
			obj   func(q string) client.Object
			field string
		}{
			{KindPod, func(q string) client.Object { return &corev1.Pod{ObjectMeta: meta(ns, qAnn(q))} },
				"metadata.annotations[scheduling.volcano.sh/queue-name]"},
			{KindPod, func(q string) client.Object {
				ann := qAnn(q)
				ann[defaults.GroupNameAnnotation] = "pg" // a PodGroup member: still refused
				return &corev1.Pod{ObjectMeta: meta(ns, ann)}
			}, "metadata.annotations[scheduling.volcano.sh/queue-name]"},
			{KindVolcanoJob, func(q string) client.Object {
				return &batchv1alpha1.Job{ObjectMeta: meta(ns, nil), Spec: batchv1alpha1.JobSpec{Queue: q, Tasks: oneTask()}}
			}, "spec.queue"},
			{KindPodGroup, func(q string) client.Object {
				return &schedulingv1beta1.PodGroup{ObjectMeta: meta(ns, nil), Spec: schedulingv1beta1.PodGroupSpec{Queue: q}}
			}, "spec.queue"},
			{KindJobSet, func(q string) client.Object {
				return &jobsetv1alpha2.JobSet{ObjectMeta: meta(ns, qAnn(q)), Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "r", Replicas: 1, Template: jobTemplate}}}}
			}, "metadata.annotations[scheduling.volcano.sh/queue-name]"},
			{KindHyperJob, func(q string) client.Object {
				return &trainingv1alpha1.HyperJob{ObjectMeta: meta(ns, nil), Spec: trainingv1alpha1.HyperJobSpec{
					ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "r", Replicas: 1, TemplateSpec: batchv1alpha1.JobSpec{Queue: q, Tasks: oneTask()}}}}}
			}, "spec.replicatedJobs[0].templateSpec.queue"},
		} {
			v := d.handlers([]Kind{tc.kind})[specOf(tc.kind).ValidatePath]
			for _, padded := range []string{" team-a ", "team-a\t", "namespace/ team-a"} {
				resp := v.Handle(context.Background(), request(t, tc.kind, admissionv1.Create, tc.obj(padded), nil))
				wantDenied(t, resp, http.StatusUnprocessableEntity, tc.field+": Invalid value: ",
					"a queue name has no spaces around it", "write \""+defaults.NormalizeQueue(padded)+"\"")
			}
			resp := v.Handle(context.Background(), request(t, tc.kind, admissionv1.Create, tc.obj("team-a"), nil))
			assert.True(t, resp.Allowed, "%s in %s: the trimmed queue was refused: %v", tc.kind, ns, resp.Result)

			resp = v.Handle(context.Background(), request(t, tc.kind, admissionv1.Update, tc.obj(" team-a "), tc.obj(" team-a ")))
			assert.True(t, resp.Allowed, "%s in %s: an unchanged padded queue was refused on UPDATE: %v", tc.kind, ns, resp.Result)
			resp = v.Handle(context.Background(), request(t, tc.kind, admissionv1.Update, tc.obj(" team-a "), tc.obj("team-a")))
			wantDenied(t, resp, http.StatusUnprocessableEntity, "a queue name has no spaces around it")
		}
	}
}

// A default that contradicts the user is left out and the CREATE is answered with a warning naming
// the default, its policy and the user's field; other defaults are still filled.
func TestSkippedDefaultsAreWarned(t *testing.T) {
	pol := builders.MakePolicy("one-cluster").Selector("team", "a").Queue("team-a").HardTopology(1).
		Propagation(hbv1.Propagation{MaxClusters: ptr.To[int32](1)}).Obj()
	d := testDeps(t, pol, nsA)
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "a"}, Spec: policyv1alpha1.PropagationSpec{
		Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
				{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}, Weight: 1},
				{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member2"}}, Weight: 1}}}}}}}
	var out policyv1alpha1.PropagationPolicy
	resp := admit(t, d.propagationPolicyMutator(), request(t, KindPropagationPolicy, admissionv1.Create, pp, nil), &out)
	require.True(t, resp.Allowed)
	assert.Empty(t, out.Spec.Placement.SpreadConstraints)
	assert.Equal(t, []string{"hyperbatch: spec.placement.spreadConstraints (maxClusters 1 from WorkloadPolicy one-cluster) was not defaulted: " +
		"it would contradict the Weighted division in spec.placement.replicaScheduling.weightPreference.staticWeightList, which names 2 clusters (member1, member2)"},
		resp.Warnings)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	var outPod corev1.Pod
	resp = admit(t, d.podMutator(), request(t, KindPod, admissionv1.Create, pod, nil), &outPod)
	require.Len(t, resp.Warnings, 2, "%v", resp.Warnings)
	assert.Contains(t, resp.Warnings[0], "defaulted metadata.annotations[scheduling.volcano.sh/queue-name]=team-a from WorkloadPolicy one-cluster")
	assert.Equal(t, `hyperbatch: metadata.annotations[volcano.sh/network-topology-mode] (networkTopology hard, highestTierAllowed 1 from WorkloadPolicy one-cluster) `+
		`was not defaulted: it would contradict spec.nodeName "n1"`, resp.Warnings[1])
	assert.NotContains(t, outPod.Annotations, defaults.NetworkTopologyModeAnnotation)
}

// Objects in an excluded namespace are admitted unchanged and unchecked, whatever the configurations
// send (the manager's --excluded-namespaces reaches the handlers, not only the namespaceSelector).
func TestExcludedNamespacesAreNotJudged(t *testing.T) {
	infra := namespace("infra", map[string]string{"team": "a"}, nil) // governed by team-a
	objs := []client.Object{teamA(), infra}
	d := newDeps(testDeps(t, objs...).reader, Options{NamespaceWait: 100e6, ExcludedNamespaces: []string{"kube-system", "infra"}})
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "infra"}, Spec: batchv1alpha1.JobSpec{Queue: "gpu", Tasks: oneTask()}}
	resp := d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job, nil))
	assert.True(t, resp.Allowed, "a disallowed queue in an excluded namespace was refused: %v", resp.Result)
	resp = d.volcanoJobMutator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job, nil))
	assert.True(t, resp.Allowed)
	assert.Empty(t, resp.Patch, "an object of an excluded namespace was defaulted")

	// The same objects in a governed namespace that is not excluded are judged.
	d = testDeps(t, objs...)
	resp = d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job, nil))
	assert.False(t, resp.Allowed)
}

// A WorkloadPolicy whose namespaceSelector could not be applied is refused, one cause per field,
// each naming the fix; an unchanged invalid selector (stored before) is not judged again on UPDATE.
func TestWorkloadPolicySelectorRefused(t *testing.T) {
	v := testDeps(t).workloadPolicyValidator()
	pol := func(reqs ...metav1.LabelSelectorRequirement) *hbv1.WorkloadPolicy {
		return &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: reqs}}}
	}
	for _, tc := range []struct {
		req  metav1.LabelSelectorRequirement
		want string
	}{
		{metav1.LabelSelectorRequirement{Key: "team", Operator: "Bogus", Values: []string{"a"}},
			`spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "Bogus": must be one of In, NotIn, Exists, DoesNotExist`},
		{metav1.LabelSelectorRequirement{Key: "team", Operator: "in", Values: []string{"a"}},
			`spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "in": must be one of In, NotIn, Exists, DoesNotExist (operators are case-sensitive: write In)`},
		{metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn},
			"spec.namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"},
		{metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}},
			"spec.namespaceSelector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"},
		{metav1.LabelSelectorRequirement{Key: "team name", Operator: metav1.LabelSelectorOpExists},
			`spec.namespaceSelector.matchExpressions[0].key: Invalid value: "team name"`},
	} {
		resp := v.Handle(context.Background(), request(t, KindWorkloadPolicy, admissionv1.Create, pol(tc.req), nil))
		wantDenied(t, resp, http.StatusUnprocessableEntity, `WorkloadPolicy.hyperbatch.dev "p" is invalid: `+tc.want)
		assert.Len(t, resp.Result.Details.Causes, 1, "%v", resp.Result.Details.Causes)
	}
	bad := pol(metav1.LabelSelectorRequirement{Key: "team", Operator: "Bogus"})
	good := pol(metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}})
	resp := v.Handle(context.Background(), request(t, KindWorkloadPolicy, admissionv1.Create, good, nil))
	assert.True(t, resp.Allowed, "%v", resp.Result)
	changed := bad.DeepCopy()
	changed.Spec.Weight = 3
	resp = v.Handle(context.Background(), request(t, KindWorkloadPolicy, admissionv1.Update, changed, bad))
	assert.True(t, resp.Allowed, "an unchanged selector was judged again: %v", resp.Result)
	resp = v.Handle(context.Background(), request(t, KindWorkloadPolicy, admissionv1.Update, bad, good))
	assert.False(t, resp.Allowed, "a selector changed to an invalid one passed")
}
