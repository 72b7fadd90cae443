package defaults

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func partitionedJob(min int32) *batchv1alpha1.Job {
	tier := 1
	return &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"}, Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
		{Name: "launcher", Replicas: 1},
		{Name: "worker", Replicas: 4, PartitionPolicy: &batchv1alpha1.PartitionPolicySpec{TotalPartitions: 2, PartitionSize: 2, MinPartitions: min,
			NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: &tier}}},
	}}}
}

// A Volcano Job's partitionPolicy becomes its PodGroup's subGroupPolicy, matching the task and
// index labels Volcano's job controller gives each pod; a PodGroup with sub-groups of its own keeps them.
func TestVolcanoJobPodGroupRestoresPartitions(t *testing.T) {
	pg := &schedulingv1beta1.PodGroup{}
	res := VolcanoJobPodGroup(pg, partitionedJob(2))
	if len(pg.Spec.SubGroupPolicy) != 2 {
		t.Fatalf("subGroupPolicy %+v, want 2 policies", pg.Spec.SubGroupPolicy)
	}
	if got := pg.Annotations[hbv1.DefaultedByAnnotation]; got != "vcjob:train/subGroupPolicy" {
		t.Errorf("defaulted-by %q", got)
	}
	if !res.Filled("spec.subGroupPolicy") {
		t.Errorf("fills %+v", res.Fills)
	}
	// Volcano's matching: the first policy whose selector matches and whose keys have values.
	match := func(l labels.Set) string {
		for _, p := range pg.Spec.SubGroupPolicy {
			sel, err := metav1.LabelSelectorAsSelector(p.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(l) && l[p.MatchLabelKeys[0]] != "" {
				return p.Name
			}
		}
		return ""
	}
	for idx, want := range map[string]string{"0": "worker-p0", "1": "worker-p0", "2": "worker-p1", "3": "worker-p1"} {
		if got := match(labels.Set{batchv1alpha1.TaskSpecKey: "worker", batchv1alpha1.TaskIndex: idx}); got != want {
			t.Errorf("worker pod %s in %q, want %q", idx, got, want)
		}
	}
	if got := match(labels.Set{batchv1alpha1.TaskSpecKey: "launcher", batchv1alpha1.TaskIndex: "0"}); got != "" {
		t.Errorf("launcher pod in sub-group %q", got)
	}
	p := pg.Spec.SubGroupPolicy[1]
	if *p.SubGroupSize != 2 || p.MinSubGroups == nil || *p.MinSubGroups != 1 || *p.NetworkTopology.HighestTierAllowed != 1 {
		t.Errorf("policy %+v", p)
	}

	// minPartitions below totalPartitions: no minSubGroups (minMember takes whole partitions).
	pg = &schedulingv1beta1.PodGroup{}
	VolcanoJobPodGroup(pg, partitionedJob(1))
	if pg.Spec.SubGroupPolicy[0].MinSubGroups != nil {
		t.Errorf("minPartitions 1 of 2: minSubGroups %v", *pg.Spec.SubGroupPolicy[0].MinSubGroups)
	}

	// Sub-groups the PodGroup has are kept.
	own := []schedulingv1beta1.SubGroupPolicySpec{{Name: "mine"}}
	pg = &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{SubGroupPolicy: own}}
	VolcanoJobPodGroup(pg, partitionedJob(2))
	if len(pg.Spec.SubGroupPolicy) != 1 || pg.Spec.SubGroupPolicy[0].Name != "mine" {
		t.Errorf("own sub-groups replaced: %+v", pg.Spec.SubGroupPolicy)
	}
}

// The Volcano Job example (examples/subgroups) gives the partitions its comment promises.
func TestVolcanoJobSubGroupsExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "subgroups", "volcano-job-partitions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1alpha1.Job{}
	if err := yaml.UnmarshalStrict(raw, job); err != nil {
		t.Fatal(err)
	}
	sg := VolcanoJobSubGroups(job)
	if len(sg) != 2 || sg[0].Name != "worker-p0" || *sg[1].SubGroupSize != 4 || *sg[1].NetworkTopology.HighestTierAllowed != 1 || *sg[0].MinSubGroups != 1 {
		t.Fatalf("sub-groups %+v", sg)
	}
}
