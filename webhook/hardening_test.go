package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/naming"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// hyperJobOf is a HyperJob in namespace "a" (governed by team-a).
func hyperJobOf(name string, rjs ...trainingv1alpha1.ReplicatedJob) *trainingv1alpha1.HyperJob {
	return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "a"}, Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: rjs}}
}

func rjOf(name string, replicas int32, clusters ...string) trainingv1alpha1.ReplicatedJob {
	return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas, ClusterNames: clusters,
		TemplateSpec: batchv1alpha1.JobSpec{Queue: "team-a"}}
}

// TestValidateHyperJobChildCount: the sum of replicas is capped at naming.MaxChildren, with a message
// naming the field, the total and the limit; an UPDATE that does not grow the count is not judged.
func TestValidateHyperJobChildCount(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	v := d.hyperJobValidator()
	huge := hyperJobOf("huge", rjOf("a", 100000, "a"), rjOf("b", 100000, "a"))
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, huge, nil)), http.StatusUnprocessableEntity,
		fmt.Sprintf("spec.replicatedJobs[*].replicas: Invalid value: 200000: the HyperJob would have 200000 child jobs (the sum of spec.replicatedJobs[*].replicas), more than the limit of %d per HyperJob", naming.MaxChildren))

	over := hyperJobOf("over", rjOf("a", naming.MaxChildren/2+1, "a"), rjOf("b", naming.MaxChildren/2, "a"))
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, over, nil)), http.StatusUnprocessableEntity,
		fmt.Sprintf("Invalid value: %d", naming.MaxChildren+1))

	at := hyperJobOf("at", rjOf("a", naming.MaxChildren/2, "a"), rjOf("b", naming.MaxChildren/2, "a"))
	resp := v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, at, nil))
	assert.True(t, resp.Allowed, "a HyperJob at the limit: %v", resp.Result)

	// Scaling up beyond the limit is refused; scaling down a HyperJob already beyond it is not.
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Update, over, at)), http.StatusUnprocessableEntity,
		"more than the limit")
	resp = v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Update, over, huge))
	assert.True(t, resp.Allowed, "scaling down: %v", resp.Result)
}

// TestValidatePropagationPolicyClusters: with allowedClusters, every cluster affinity must name its
// clusters among them; an unchanged list is not judged again on UPDATE.
func TestValidatePropagationPolicyClusters(t *testing.T) {
	d := testDeps(t, builders.TeamA().AllowedClusters("a", "b").Obj(), nsA, namespace("free", nil, nil))
	v := d.propagationPolicyValidator()
	pp := func(ns string, affinity *policyv1alpha1.ClusterAffinity, terms ...policyv1alpha1.ClusterAffinityTerm) *policyv1alpha1.PropagationPolicy {
		return &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: ns},
			Spec: policyv1alpha1.PropagationSpec{Placement: policyv1alpha1.Placement{ClusterAffinity: affinity, ClusterAffinities: terms}}}
	}
	names := func(n ...string) *policyv1alpha1.ClusterAffinity {
		return &policyv1alpha1.ClusterAffinity{ClusterNames: n}
	}
	handle := func(op admissionv1.Operation, obj, old *policyv1alpha1.PropagationPolicy) admission.Response {
		if old == nil {
			return v.Handle(context.Background(), request(t, KindPropagationPolicy, op, obj, nil))
		}
		return v.Handle(context.Background(), request(t, KindPropagationPolicy, op, obj, old))
	}
	for _, ok := range []*policyv1alpha1.PropagationPolicy{
		pp("a", names("a")), pp("a", names("a", "b")), pp("free", nil),
		pp("a", nil, policyv1alpha1.ClusterAffinityTerm{AffinityName: "x", ClusterAffinity: *names("b")}),
	} {
		resp := handle(admissionv1.Create, ok, nil)
		assert.True(t, resp.Allowed, "%s %s: %v", ok.Namespace, toJSONString(ok.Spec.Placement), resp.Result)
	}
	wantDenied(t, handle(admissionv1.Create, pp("a", names("a", "c")), nil), http.StatusUnprocessableEntity,
		`spec.placement.clusterAffinity.clusterNames: Forbidden: cluster "c" is not allowed in namespace "a": WorkloadPolicy "team-a" allows only "a", "b"`)
	labelsOnly := &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "h100"}}}
	wantDenied(t, handle(admissionv1.Create, pp("a", labelsOnly), nil), http.StatusUnprocessableEntity,
		`spec.placement.clusterAffinity.clusterNames: Forbidden: naming no clusters (which propagates to every cluster) is not allowed`)
	wantDenied(t, handle(admissionv1.Create, pp("a", nil,
		policyv1alpha1.ClusterAffinityTerm{AffinityName: "x", ClusterAffinity: *names("a")},
		policyv1alpha1.ClusterAffinityTerm{AffinityName: "y", ClusterAffinity: *names("z")}), nil), http.StatusUnprocessableEntity,
		`spec.placement.clusterAffinities[1].clusterNames: Forbidden: cluster "z"`)
	// UPDATE: an unchanged list passes (the policy may have been tightened since), a changed one is judged.
	assert.True(t, handle(admissionv1.Update, pp("a", names("c")), pp("a", names("c"))).Allowed)
	wantDenied(t, handle(admissionv1.Update, pp("a", names("d")), pp("a", names("c"))), http.StatusUnprocessableEntity, `cluster "d"`)
}

func toJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestValidateHyperJobClusters: a replicatedJob's clusterNames, or the policy's default clusters when
// it names none, must be allowed.
func TestValidateHyperJobClusters(t *testing.T) {
	d := testDeps(t, builders.TeamA().AllowedClusters("a", "b").Obj(), nsA)
	v := d.hyperJobValidator()
	ok := hyperJobOf("ok", rjOf("x", 1, "a"), rjOf("y", 1)) // y gets the policy's default clusters a, b
	resp := v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, ok, nil))
	assert.True(t, resp.Allowed, "%v", resp.Result)
	bad := hyperJobOf("bad", rjOf("x", 1, "a", "c"))
	wantDenied(t, v.Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, bad, nil)), http.StatusUnprocessableEntity,
		`spec.replicatedJobs[0].clusterNames: Forbidden: cluster "c" is not allowed in namespace "a": WorkloadPolicy "team-a" allows only "a", "b"`)

	// Without a default to fall back on, naming no clusters means every cluster.
	noDefault := builders.TeamA().AllowedClusters("a").Obj()
	noDefault.Spec.Defaults.Propagation = nil
	d = testDeps(t, noDefault, nsA)
	wantDenied(t, d.hyperJobValidator().Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, hyperJobOf("open", rjOf("x", 1)), nil)),
		http.StatusUnprocessableEntity, `spec.replicatedJobs[0].clusterNames: Forbidden: naming no clusters`)
}

// TestPodUpdateCannotDropTheGroupToSkipTheQueueCheck: a Pod created with a disallowed queue and a
// group-name annotation (not judged: a PodGroup member) that then drops the annotation is judged.
func TestPodUpdateCannotDropTheGroupToSkipTheQueueCheck(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	pv := d.podValidator()
	pod := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", Annotations: ann}}
	}
	member := pod(map[string]string{defaults.QueueNameAnnotation: "gpu", defaults.GroupNameAnnotation: "pg"})
	alone := pod(map[string]string{defaults.QueueNameAnnotation: "gpu"})
	assert.True(t, pv.Handle(context.Background(), request(t, KindPod, admissionv1.Create, member, nil)).Allowed)
	wantDenied(t, pv.Handle(context.Background(), request(t, KindPod, admissionv1.Update, alone, member)), http.StatusUnprocessableEntity,
		`metadata.annotations[scheduling.volcano.sh/queue-name]: Forbidden: queue "gpu" is not allowed in namespace "a"`)
	// A Pod judged before (no group) keeps its unchanged queue on UPDATE.
	assert.True(t, pv.Handle(context.Background(), request(t, KindPod, admissionv1.Update, alone, alone)).Allowed)
}

// TestInvalidPolicyFailsClosedAtAdmission: a stored policy whose selector cannot be parsed still
// restricts queues, naming itself as invalid.
func TestInvalidPolicyFailsClosedAtAdmission(t *testing.T) {
	broken := builders.MakePolicy("broken").InvalidSelector().AllowedQueues("gpu").Obj()
	d := testDeps(t, broken, namespace("free", nil, nil))
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "free"}, Spec: batchv1alpha1.JobSpec{Queue: "cpu", Tasks: oneTask()}}
	wantDenied(t, d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job, nil)),
		http.StatusUnprocessableEntity, `queue "cpu" is not allowed in namespace "free": WorkloadPolicy "broken" allows only "gpu" (its namespaceSelector is invalid`)
	job.Spec.Queue = "gpu"
	assert.True(t, d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job, nil)).Allowed)
}

// TestHyperJobChildGetsNoTTLFromTheWebhook: the Volcano Job webhook does not give a HyperJob's child
// the policy's TTL (the controller leaves it out on purpose); other Volcano Jobs still get it.
func TestHyperJobChildGetsNoTTLFromTheWebhook(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	owner := trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", UID: "u"}}
	child := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "hj-w-0", Namespace: "a",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&owner, trainingv1alpha1.SchemeGroupVersion.WithKind("HyperJob"))}}}
	var got batchv1alpha1.Job
	admit(t, d.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Create, child, nil), &got)
	assert.Nil(t, got.Spec.TTLSecondsAfterFinished, "a HyperJob child got a TTL")
	assert.Equal(t, "team-a", got.Spec.Queue, "the other defaults still apply")

	plain := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}}
	var gotPlain batchv1alpha1.Job
	admit(t, d.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Create, plain, nil), &gotPlain)
	if assert.NotNil(t, gotPlain.Spec.TTLSecondsAfterFinished) {
		assert.EqualValues(t, 86400, *gotPlain.Spec.TTLSecondsAfterFinished)
	}
}
