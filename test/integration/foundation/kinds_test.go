package foundation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "trainer", Image: "registry.example/trainer:v1"}},
	}}
}

// Every kind hyperbatch handles is served by the real apiserver and survives a create/get round trip
// with the fields hyperbatch relies on.
func TestKindsRoundTrip(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	c := env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "roundtrip", Labels: map[string]string{"team": "a"}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}

	tier := int32(2)
	objs := []client.Object{
		&hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: hbv1.WorkloadPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			Weight:            10,
			Defaults: hbv1.PolicyDefaults{Queue: "team-a", PriorityClassName: "batch-normal",
				NetworkTopology:         &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologyHard, HighestTierAllowed: &tier},
				TTLSecondsAfterFinished: ptr.To[int32](86400), ActiveDeadlineSeconds: ptr.To[int64](604800),
				Propagation: &hbv1.Propagation{ClusterNames: []string{"a", "b"}, ReplicaDivisionPreference: "Aggregated",
					MaxClusters: ptr.To[int32](1), PropagateDeps: ptr.To(true)}},
			AllowedQueues: []string{"team-a", "shared"},
		}},
		&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "leaf-0"}, Spec: topologyv1alpha1.HyperNodeSpec{
			Tier: 1, TierName: "leaf",
			Members: []topologyv1alpha1.MemberSpec{{Type: topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: "node-0"}}}},
		}},
		&schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}},
		&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns.Name},
			Spec: schedulingv1beta1.PodGroupSpec{MinMember: 4, Queue: "team-a",
				NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierName: "spine"}}},
		&batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "vcjob", Namespace: ns.Name}, Spec: batchv1alpha1.JobSpec{
			MinAvailable: 2, Queue: "team-a", SchedulerName: "volcano", MaxRetry: 3,
			Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 2, Template: podTemplate()}},
		}},
		&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: ns.Name}, Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: "vcjob"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a"}}},
		}},
		&jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: ns.Name}, Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: podTemplate()}}}},
		}},
		&trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: ns.Name}, Spec: trainingv1alpha1.HyperJobSpec{
			ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "trainer", Replicas: 2, ClusterNames: []string{"a"},
				TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 1, Queue: "team-a", MaxRetry: 3, Tasks: []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 1, Template: podTemplate()}}}}},
		}},
	}
	for _, o := range objs {
		want := o.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		got := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatalf("get %T %s: %v", o, o.GetName(), err)
		}
		if !equality.Semantic.DeepDerivative(specOf(t, want), specOf(t, got)) {
			t.Errorf("%T %s: spec did not survive the round trip:\nsent %+v\ngot  %+v", o, o.GetName(), specOf(t, want), specOf(t, got))
		}
	}
}

// specOf returns the part of an object the user wrote (its spec), for comparison after a round trip.
func specOf(t *testing.T, o client.Object) any {
	t.Helper()
	switch v := o.(type) {
	case *hbv1.WorkloadPolicy:
		return v.Spec
	case *topologyv1alpha1.HyperNode:
		return v.Spec
	case *schedulingv1beta1.Queue:
		return v.Spec
	case *schedulingv1beta1.PodGroup:
		return v.Spec
	case *batchv1alpha1.Job:
		return v.Spec
	case *policyv1alpha1.PropagationPolicy:
		return v.Spec
	case *jobsetv1alpha2.JobSet:
		return v.Spec
	case *trainingv1alpha1.HyperJob:
		return v.Spec
	}
	t.Fatalf("no spec accessor for %T", o)
	return nil
}

// The upstream CRDs default some fields before any admission webhook sees the object. hyperbatch's
// defaulting must treat these values as "not written by the user"; this test pins them down so an
// upstream change is noticed.
func TestUpstreamSchemaDefaults(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "schema-defaults"}}); err != nil {
		t.Fatal(err)
	}
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "schema-defaults"},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 2, NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{}}}
	if err := c.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	if pg.Spec.Queue != "default" {
		t.Errorf("PodGroup spec.queue defaulted to %q, want \"default\"", pg.Spec.Queue)
	}
	// Only the mode is defaulted (volcano.sh/apis v1.14.0): no tier bound is invented, so
	// `{mode: hard}` stays "hard without a tier" and highestTierName is never shadowed by a tier 1.
	if nt := pg.Spec.NetworkTopology; nt.Mode != "hard" || nt.HighestTierAllowed != nil || nt.HighestTierName != "" {
		t.Errorf("PodGroup spec.networkTopology defaulted to %+v, want mode hard and no tier", nt)
	}
	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "schema-defaults"}, Spec: trainingv1alpha1.HyperJobSpec{
		ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "r", TemplateSpec: batchv1alpha1.JobSpec{
			Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: podTemplate()}}}}}}}
	if err := c.Create(ctx, hj); err != nil {
		t.Fatal(err)
	}
	rj := hj.Spec.ReplicatedJobs[0]
	if rj.Replicas != 1 || rj.TemplateSpec.Queue != "default" || rj.TemplateSpec.MaxRetry != 3 {
		t.Errorf("HyperJob defaults: replicas=%d queue=%q maxRetry=%d, want 1, default, 3", rj.Replicas, rj.TemplateSpec.Queue, rj.TemplateSpec.MaxRetry)
	}
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: "schema-defaults"}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}},
		Placement:         policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{}}}}
	if err := c.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	if got := pp.Spec.Placement.ReplicaScheduling.ReplicaSchedulingType; got != policyv1alpha1.ReplicaSchedulingTypeDivided {
		t.Errorf("PropagationPolicy replicaSchedulingType defaulted to %q, want Divided", got)
	}
}

// The WorkloadPolicy CRD's schema and CEL rules reject bad policies with a message naming the field.
func TestWorkloadPolicyValidation(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	cases := []struct {
		name    string
		spec    hbv1.WorkloadPolicySpec
		wantMsg string
	}{
		{"both tier fields", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{
			HighestTierAllowed: ptr.To[int32](1), HighestTierName: "spine"}}}, "set highestTierAllowed or highestTierName, not both"},
		{"negative weight", hbv1.WorkloadPolicySpec{Weight: -1}, "spec.weight"},
		{"unknown mode", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{Mode: "strict"}}}, "spec.defaults.networkTopology.mode"},
		{"negative ttl", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{TTLSecondsAfterFinished: ptr.To[int32](-5)}}, "spec.defaults.ttlSecondsAfterFinished"},
		{"zero deadline", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{ActiveDeadlineSeconds: ptr.To[int64](0)}}, "spec.defaults.activeDeadlineSeconds"},
		{"empty allowed queue", hbv1.WorkloadPolicySpec{AllowedQueues: []string{""}}, "spec.allowedQueues[0]"},
		{"tier zero", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{HighestTierAllowed: ptr.To[int32](0)}}}, "highestTierAllowed"},
		// Names with spaces around them, or blank, are refused with what a valid name looks like.
		{"padded queue", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Queue: " team-a "}},
			"spec.defaults.queue: Invalid value: \"string\": a Volcano queue name has lowercase letters, digits, '-' and '.', starts and ends with a letter or digit and has no spaces, such as 'team-a'"},
		{"blank queue", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Queue: "   "}}, "spec.defaults.queue: Invalid value"},
		{"space after namespace/", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Queue: "namespace/ gpu"}}, "spec.defaults.queue: Invalid value"},
		{"padded allowed queue", hbv1.WorkloadPolicySpec{AllowedQueues: []string{"team-a", " shared"}},
			"spec.allowedQueues: Invalid value: \"array\": a Volcano queue name has"},
		{"padded priority class", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{PriorityClassName: "batch-high "}},
			"spec.defaults.priorityClassName: Invalid value: \"string\": a PriorityClass name has lowercase letters"},
		{"scheduler with spaces", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{SchedulerName: " hyperbatch-scheduler"}},
			"spec.defaults.schedulerName: Invalid value: \"string\": a scheduler name has"},
		{"padded cluster", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{Propagation: &hbv1.Propagation{ClusterNames: []string{"member1 "}}}},
			"spec.defaults.propagation.clusterNames: Invalid value: \"array\": a Karmada cluster name has"},
		{"padded tier name", hbv1.WorkloadPolicySpec{Defaults: hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{HighestTierName: "spine "}}},
			"spec.defaults.networkTopology.highestTierName: Invalid value: \"string\": a tier name has no spaces around it"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + strings.ReplaceAll(tc.name, " ", "-")}, Spec: tc.spec}
			err := env.Client.Create(ctx, p)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("case %d: want an Invalid error, got %v", i, err)
			}
			// kube-apiserver up to 1.36 shows the value's type ("Invalid value: \"string\": ..."), 1.37
			// the value itself: check the field and the message, not what stands between them.
			want := []string{tc.wantMsg}
			if field, rest, ok := strings.Cut(tc.wantMsg, ": Invalid value: \""); ok {
				if _, msg, ok := strings.Cut(rest, "\": "); ok {
					want = []string{field + ": Invalid value: ", msg}
				}
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err.Error(), tc.wantMsg)
				}
			}
		})
	}
	// Well-formed names and selectors of every kind pass.
	good := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "well-formed"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}, {Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		Defaults: hbv1.PolicyDefaults{Queue: "namespace/batch.gpu-1", PriorityClassName: "batch.high", SchedulerName: "hyperbatch-scheduler",
			Propagation: &hbv1.Propagation{ClusterNames: []string{"member1", "member-2"}}},
		AllowedQueues: []string{"team-a", "namespace/batch.gpu-1", "default"}}}
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatalf("a well-formed policy was refused: %v", err)
	}
	// The default mode is filled by the schema.
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default-mode"}, Spec: hbv1.WorkloadPolicySpec{
		Defaults: hbv1.PolicyDefaults{NetworkTopology: &hbv1.NetworkTopology{HighestTierAllowed: ptr.To[int32](1)}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := p.Spec.Defaults.NetworkTopology.Mode; got != hbv1.NetworkTopologyHard {
		t.Errorf("networkTopology.mode defaulted to %q, want hard", got)
	}
}

// A CRD directory that is missing fails the harness before anything starts, telling the user the fix.
func TestStartFailsWhenCRDDirMissing(t *testing.T) {
	_, err := framework.Start(framework.Options{CRDDirs: []string{filepath.Join(t.TempDir(), "nope")}})
	if err == nil || !strings.Contains(err.Error(), "make crds") {
		t.Fatalf("want an error telling to run 'make crds', got %v", err)
	}
}

// An invalid CRD fails the harness: the real apiserver rejects it and Start reports the error.
func TestStartFailsOnInvalidCRD(t *testing.T) {
	dir := t.TempDir()
	bad := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: notatype}
`
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := framework.Start(framework.Options{CRDDirs: []string{dir}})
	if err == nil {
		_ = e.Stop()
		t.Fatal("Start accepted an invalid CRD")
	}
	if !strings.Contains(err.Error(), "widgets.example.com") && !strings.Contains(err.Error(), "notatype") {
		t.Errorf("error does not name the bad CRD: %v", err)
	}
}
