package defaults

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// VolcanoJobSubGroups is the subGroupPolicy of a Volcano Job whose tasks have a partitionPolicy
// (volcano.sh/apis v1.14): per task, partition p is the pods whose volcano.sh/task-index is in
// p×partitionSize … (p+1)×partitionSize−1, one policy "<task>-p<p>" each, selected by the task's
// volcano.sh/task-spec label and those indexes and keyed by volcano.sh/task-spec, with
// subGroupSize partitionSize and the partition's networkTopology. Volcano v1.14.0's controller
// labels each pod with its partition (volcano.sh/partition-id); the pinned v1.14.0-alpha.0 neither
// labels the pods nor writes subGroupPolicy, but it does label every pod with its task and index,
// which both builds have, so these policies match the pods of either. minPartitions equal to
// totalPartitions makes every partition required (minSubGroups 1); a smaller minPartitions cannot
// be said per policy and is left to minMember (the Job's minAvailable), which takes whole
// partitions until it is met. A task whose totalPartitions × partitionSize is not its replicas
// gets none (PartitionMismatch: the Volcano Job webhook refuses to create such a Job). nil when no
// task has a partitionPolicy.
func VolcanoJobSubGroups(job *batchv1alpha1.Job) []schedulingv1beta1.SubGroupPolicySpec {
	if job == nil {
		return nil
	}
	var out []schedulingv1beta1.SubGroupPolicySpec
	for _, task := range job.Spec.Tasks {
		pp := task.PartitionPolicy
		if pp == nil || PartitionMismatch(task) != "" {
			continue
		}
		var nt *schedulingv1beta1.NetworkTopologySpec
		if t := pp.NetworkTopology; t != nil {
			nt = &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.NetworkTopologyMode(t.Mode),
				HighestTierAllowed: cloneInt(t.HighestTierAllowed), HighestTierName: t.HighestTierName}
		}
		var minSub *int32
		if pp.MinPartitions == pp.TotalPartitions {
			one := int32(1)
			minSub = &one
		}
		for p := int32(0); p < pp.TotalPartitions; p++ {
			idx := make([]string, 0, pp.PartitionSize)
			for i := p * pp.PartitionSize; i < (p+1)*pp.PartitionSize; i++ {
				idx = append(idx, strconv.Itoa(int(i)))
			}
			size := pp.PartitionSize
			spec := schedulingv1beta1.SubGroupPolicySpec{
				Name:         fmt.Sprintf("%s-p%d", task.Name, p),
				SubGroupSize: &size,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1alpha1.TaskSpecKey: task.Name},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: batchv1alpha1.TaskIndex, Operator: metav1.LabelSelectorOpIn, Values: idx}}},
				MatchLabelKeys:  []string{batchv1alpha1.TaskSpecKey},
				NetworkTopology: nt.DeepCopy(),
			}
			if minSub != nil {
				m := *minSub
				spec.MinSubGroups = &m
			}
			out = append(out, spec)
		}
	}
	return out
}

// PartitionMismatch says what is wrong with a task's partitionPolicy for sub-groups ("" when nothing
// is, or it has none): partitions and their size must be positive and multiply to the task's replicas.
func PartitionMismatch(task batchv1alpha1.TaskSpec) string {
	pp := task.PartitionPolicy
	if pp == nil {
		return ""
	}
	if pp.TotalPartitions < 1 || pp.PartitionSize < 1 || pp.TotalPartitions*pp.PartitionSize != task.Replicas {
		return fmt.Sprintf("totalPartitions %d × partitionSize %d must equal the task's replicas %d: set them so that each of the %d pods is in one partition, or remove partitionPolicy",
			pp.TotalPartitions, pp.PartitionSize, task.Replicas, task.Replicas)
	}
	if pp.MinPartitions < 0 || pp.MinPartitions > pp.TotalPartitions {
		return fmt.Sprintf("minPartitions %d must be between 0 and totalPartitions %d", pp.MinPartitions, pp.TotalPartitions)
	}
	return ""
}
