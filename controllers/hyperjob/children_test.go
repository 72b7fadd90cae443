package hyperjob

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func TestHash(t *testing.T) {
	spec := batchv1alpha1.JobSpec{Queue: "q", Tasks: []batchv1alpha1.TaskSpec{task("w", 2, "1")}}
	h1, err := Hash(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(h1) != HashLength || HashLength != 63 || !regexp.MustCompile(`^[0-9a-f]+$`).MatchString(h1) {
		t.Fatalf("hash %q: want 63 lowercase hex characters", h1)
	}
	h2, _ := Hash(spec.DeepCopy())
	if h1 != h2 {
		t.Fatal("hash of an equal value differs")
	}
	spec.Tasks[0].Replicas = 3
	if h3, _ := Hash(&spec); h3 == h1 {
		t.Fatal("hash did not change with the spec")
	}
	// Known value: an empty ClusterAffinity is the JSON "{}", whose SHA-256 is 44136fa3….
	empty, _ := Hash(&policyv1alpha1.ClusterAffinity{})
	if empty != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8"[:HashLength] {
		t.Fatalf("hash of {} = %s", empty)
	}
}

func hyperJob(rjs ...trainingv1alpha1.ReplicatedJob) *trainingv1alpha1.HyperJob {
	return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: rjs}}
}

func TestBuildPlanChildren(t *testing.T) {
	hj := hyperJob(
		trainingv1alpha1.ReplicatedJob{Name: "a", Replicas: 2, ClusterNames: []string{"c1", "c2"},
			TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 2, "1")}}},
		*func() *trainingv1alpha1.ReplicatedJob {
			rj := staticRJ(4, task("w", 8, "1"))
			rj.Name = "b"
			return rj
		}(),
	)
	p, err := BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil)
	if err != nil || p.Refusal != nil {
		t.Fatal(err, p.Refusal)
	}
	var names []string
	for _, c := range p.children {
		names = append(names, c.name)
	}
	want := []string{"hj-a-0", "hj-a-1", "hj-b-0", "hj-b-1"}
	if !slices.Equal(names, want) || p.SplitCount() != 4 || p.MinAvailable != 4 {
		t.Fatalf("children %v (split %d, minAvailable %d), want %v", names, p.SplitCount(), p.MinAvailable, want)
	}
	if p.children[0].templateHash != p.children[1].templateHash || p.children[0].templateHash == p.children[2].templateHash {
		t.Error("template hash must be shared within a replicatedJob and differ between different templates")
	}
	if got := p.children[2].template.Tasks[0].Replicas; got != 4 {
		t.Errorf("split child worker replicas = %d, want 4", got)
	}

	pp := p.children[0].pp
	wantSpec := policyv1alpha1.PropagationSpec{
		PropagateDeps:     true,
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: "hj-a-0"}},
		Placement: policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"c1", "c2"}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
		},
	}
	if got, want := mustHash(t, &pp.Spec), mustHash(t, &wantSpec); got != want || ppDrifted(&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: wantSpec}, pp) {
		t.Fatalf("PropagationPolicy spec %+v, want %+v", pp.Spec, wantSpec)
	}
	if h, _ := Hash(&pp.Spec); pp.Labels[hbv1.PPSpecHashLabel] != h || h != p.children[0].ppHash {
		t.Error("pp-spec-hash label is not the hash of the spec")
	}
	if pp.Labels[hbv1.HyperJobNameLabel] != "hj" || pp.Labels[hbv1.ReplicatedJobNameLabel] != "a" {
		t.Errorf("PropagationPolicy labels %v", pp.Labels)
	}
	if ref := metav1.GetControllerOf(pp); ref == nil || ref.UID != "uid-1" || ref.Kind != "HyperJob" {
		t.Errorf("PropagationPolicy controller %+v", ref)
	}
	if p.children[0].ppHash == p.children[1].ppHash {
		t.Error("different children must have different PropagationPolicy hashes (they select different jobs)")
	}

	job := desiredJob(hj, &p.children[2], defaults.Namespace{Name: "ns"}, nil)
	if job.Name != "hj-b-0" || job.Labels[hbv1.VCJobTemplateSpecHashLabel] != p.children[2].templateHash ||
		job.Labels[hbv1.ReplicatedJobNameLabel] != "b" || !metav1.IsControlledBy(job, hj) {
		t.Errorf("job %s labels %v", job.Name, job.Labels)
	}
	job.Spec.Tasks[0].Replicas = 99
	if p.children[3].template.Tasks[0].Replicas != 4 {
		t.Error("desiredJob shares the template with other children")
	}
}

func TestBuildPlanPolicyDefaults(t *testing.T) {
	pol := hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: hbv1.WorkloadPolicySpec{
		Defaults: hbv1.PolicyDefaults{Queue: "team-q", TTLSecondsAfterFinished: ptr.To[int32](60),
			Propagation: &hbv1.Propagation{ClusterNames: []string{"p1", "p2", "p3"}, MaxClusters: ptr.To[int32](3)}}}}
	pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{pol})
	if err != nil {
		t.Fatal(err)
	}
	ns := defaults.Namespace{Name: "ns"}
	hj := hyperJob(
		trainingv1alpha1.ReplicatedJob{Name: "own", Replicas: 1, ClusterNames: []string{"c1"}, TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}},
		trainingv1alpha1.ReplicatedJob{Name: "open", Replicas: 1, TemplateSpec: batchv1alpha1.JobSpec{Queue: "default", Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}},
	)
	p, err := BuildPlan(hj, ns, pols)
	if err != nil || p.Refusal != nil {
		t.Fatal(err, p.Refusal)
	}
	if got := p.children[0].pp.Spec.Placement.ClusterAffinity.ClusterNames; !slices.Equal(got, []string{"c1"}) {
		t.Errorf("replicatedJob clusters replaced by the policy: %v", got)
	}
	open := p.children[1].pp
	if got := open.Spec.Placement.ClusterAffinity.ClusterNames; !slices.Equal(got, []string{"p1", "p2", "p3"}) {
		t.Errorf("open clusterNames not defaulted: %v", got)
	}
	if got := open.Spec.Placement.SpreadConstraints; len(got) != 1 || got[0].MaxGroups != 1 {
		t.Errorf("the child's own spread constraint must win over the policy's maxClusters: %+v", got)
	}
	if got := open.Annotations[hbv1.DefaultedByAnnotation]; got != "team/clusterNames" {
		t.Errorf("defaulted-by = %q", got)
	}
	job := desiredJob(hj, &p.children[1], ns, pols)
	// Defaulted, but with no TTL of its own: the HyperJob's lifecycle governs its children.
	if job.Spec.Queue != "team-q" || job.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("child job: queue %q ttl %v, want team-q and no TTL", job.Spec.Queue, job.Spec.TTLSecondsAfterFinished)
	}
	if got := job.Annotations[hbv1.DefaultedByAnnotation]; strings.Contains(got, "ttl") {
		t.Errorf("defaulted-by %q names a TTL the child does not have", got)
	}
	if !slices.Equal(job.Finalizers, []string{hbv1.HyperJobChildFinalizer}) {
		t.Errorf("child finalizers %v, want %s", job.Finalizers, hbv1.HyperJobChildFinalizer)
	}
	// A TTL in the template is not copied either (the template hash still covers it).
	withTTL := hj.DeepCopy()
	withTTL.Spec.ReplicatedJobs[1].TemplateSpec.TTLSecondsAfterFinished = ptr.To[int32](5)
	pt, _ := BuildPlan(withTTL, ns, pols)
	if j := desiredJob(withTTL, &pt.children[1], ns, pols); j.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("template TTL copied onto the child: %v", *j.Spec.TTLSecondsAfterFinished)
	}
	if job.Labels[hbv1.VCJobTemplateSpecHashLabel] != p.children[1].templateHash {
		t.Error("template hash must be of the template before policy defaults")
	}
	// A policy change leaves the template hash alone.
	pols2, _ := defaults.NewPolicies(nil)
	p2, _ := BuildPlan(hj, ns, pols2)
	if p2.children[1].templateHash != p.children[1].templateHash {
		t.Error("template hash depends on the WorkloadPolicy")
	}
	if p2.children[1].ppHash == p.children[1].ppHash {
		t.Error("PropagationPolicy hash must follow the WorkloadPolicy")
	}
}

func TestBuildPlanMaxDomainsAndMinAvailable(t *testing.T) {
	rj := func(name string, clusters ...string) trainingv1alpha1.ReplicatedJob {
		return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: 2, ClusterNames: clusters,
			TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}}
	}
	hj := hyperJob(rj("a", "c1", "c2", "c3"), rj("b", "c3", "c4"))
	hj.Spec.MaxDomains = ptr.To[int32](2)
	hj.Spec.MinAvailable = ptr.To[int32](3)
	p, err := BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil)
	if err != nil || p.Refusal == nil {
		t.Fatalf("want a refusal: maxDomains 2 keeps c1,c2 and b may use neither; got %v %v", err, p.Refusal)
	}
	if p.Refusal.Condition != ConditionSpecInvalid || p.Refusal.Reason != ReasonInvalidMaxDomains || !strings.Contains(p.Refusal.Message, `"b"`) {
		t.Fatalf("refusal %+v", p.Refusal)
	}
	hj.Spec.MaxDomains = ptr.To[int32](3)
	p, _ = BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil)
	if p.Refusal != nil {
		t.Fatal(p.Refusal)
	}
	if got := p.children[0].pp.Spec.Placement.ClusterAffinity.ClusterNames; !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("a clusters %v", got)
	}
	if got := p.children[2].pp.Spec.Placement.ClusterAffinity.ClusterNames; !slices.Equal(got, []string{"c3"}) {
		t.Errorf("b clusters %v, want [c3] (c4 is the 4th distinct cluster)", got)
	}
	if p.MinAvailable != 3 {
		t.Errorf("minAvailable %d", p.MinAvailable)
	}

	hj.Spec.MinAvailable = ptr.To[int32](5)
	if p, _ = BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil); p.Refusal == nil || p.Refusal.Reason != ReasonInvalidMinAvailable {
		t.Fatalf("minAvailable above the child count: %+v", p.Refusal)
	}
	hj.Spec.MinAvailable = nil
	hj.Spec.MaxDomains = ptr.To[int32](1)
	hj.Spec.ReplicatedJobs = []trainingv1alpha1.ReplicatedJob{rj("a")}
	if p, _ = BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil); p.Refusal == nil || !strings.Contains(p.Refusal.Message, "needs candidate clusters") {
		t.Fatalf("maxDomains without clusters: %+v", p.Refusal)
	}
}

func TestBuildPlanNames(t *testing.T) {
	hj := hyperJob(trainingv1alpha1.ReplicatedJob{Name: strings.Repeat("r", 51), Replicas: 10,
		TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}})
	hj.Name = strings.Repeat("h", 10)
	p, _ := BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil)
	if p.Refusal == nil || p.Refusal.Reason != ReasonInvalidName || !strings.Contains(p.Refusal.Message, "-9") {
		t.Fatalf("64-character child name: %+v", p.Refusal)
	}
	hj.Spec.ReplicatedJobs[0].Replicas = 1
	hj.Spec.ReplicatedJobs[0].Name = strings.Repeat("r", 50)
	if p, _ = BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil); p.Refusal != nil {
		t.Fatalf("63-character child name refused: %+v", p.Refusal)
	}
}

func mustHash(t *testing.T, v any) string {
	t.Helper()
	h, err := Hash(v)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPPDriftedOnlyOwnedFields(t *testing.T) {
	p, _ := BuildPlan(hyperJob(replicatedJob1("a", "c1")), defaults.Namespace{Name: "ns"}, nil)
	want := p.children[0].pp
	have := want.DeepCopy()
	if ppDrifted(want, have) {
		t.Fatal("equal policies drifted")
	}
	have.Spec.Placement.ClusterAffinity.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
	have.Spec.Placement.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
	have.Spec.Priority = ptr.To[int32](5)
	if ppDrifted(want, have) {
		t.Fatal("fields someone else added count as drift: apply cannot remove them and would repeat forever")
	}
	// Karmada's webhook writes the policy's namespace into a selector that names none (issue 38:
	// every pass applied a change that changed nothing and reported "updated … in place").
	have.Namespace = "ns"
	have.Spec.ResourceSelectors[0].Namespace = "ns"
	if ppDrifted(want, have) {
		t.Fatal("a selector's namespace defaulted to the policy's own counts as drift")
	}
	have.Spec.ResourceSelectors[0].Namespace = "other"
	if !ppDrifted(want, have) {
		t.Fatal("a selector moved to another namespace is drift")
	}
	have.Spec.ResourceSelectors[0].Namespace = "ns"
	have.Spec.Placement.ClusterAffinity.ClusterNames = []string{"other"}
	if !ppDrifted(want, have) {
		t.Fatal("an edited clusterNames is drift")
	}
}

func replicatedJob1(name string, clusters ...string) trainingv1alpha1.ReplicatedJob {
	return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: 1, ClusterNames: clusters,
		TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}}
}
