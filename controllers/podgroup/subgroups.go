package podgroup

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1alpha1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// maxSubGroupPolicies bounds the policies one JobSet's sub-groups make (hyperbatch.dev/subgroup-by
// "pods" makes one per block of completion indexes or of Jobs).
const maxSubGroupPolicies = 64

// completionIndexLabel is the pod label of an Indexed Job's completion index: the key the Job API
// names as an annotation, which the Job controller also sets as a label (PodIndexLabel, GA in 1.32).
const completionIndexLabel = batchv1.JobCompletionIndexAnnotation

// SubGroups is the PodGroup's spec.subGroupPolicy for a JobSet that asks for sub-groups with
// hyperbatch.dev/subgroup-by (nil when it does not). The policies match the labels the JobSet and
// Job controllers put on every pod (replicatedJob name, Job index, completion index), so the pods
// need no label of ours:
//
//   - "replica": per replicatedJob, one policy selecting its pods, keyed by the Job index: each Job
//     is a sub-group of min(parallelism, completions) pods.
//   - "pods" with hyperbatch.dev/subgroup-pods N: each N pods of a replicatedJob in completion-index
//     order. N dividing the pods per Job: one policy per block b of N completion indexes
//     (<replicatedJob>-c<b>), keyed by the Job index. N a multiple of the pods per Job: one policy per
//     block b of N/pods-per-Job Jobs (<replicatedJob>-j<b>), keyed by the replicatedJob name (one
//     sub-group each).
//
// A bad annotation is an error naming it and the fix.
func SubGroups(js *jobsetv1alpha2.JobSet) ([]schedulingv1beta1.SubGroupPolicySpec, error) {
	return SubGroupsFor(js, js.Annotations)
}

// SubGroupsFor is SubGroups with the sub-group annotations read from ann instead of the JobSet's:
// a TrainJob's JobSet takes them from the TrainJob (defaults.TrainJobSubGroupAnnotations).
func SubGroupsFor(js *jobsetv1alpha2.JobSet, ann map[string]string) ([]schedulingv1beta1.SubGroupPolicySpec, error) {
	ask, err := defaults.ParseSubGroupAsk(ann)
	if err != nil || ask == nil {
		return nil, err
	}
	by, size, nt := ask.By, ask.Pods, ask.NetworkTopology
	var out []schedulingv1beta1.SubGroupPolicySpec
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		perJob := podsAtOnce(rj)
		if perJob < 1 || rj.Replicas < 1 {
			continue
		}
		sel := func(extra ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
			return &metav1.LabelSelector{MatchLabels: map[string]string{jobsetv1alpha2.ReplicatedJobNameKey: rj.Name}, MatchExpressions: extra}
		}
		policy := func(name string, n int64, s *metav1.LabelSelector, key string) schedulingv1beta1.SubGroupPolicySpec {
			return schedulingv1beta1.SubGroupPolicySpec{Name: name, SubGroupSize: ptr.To(int32(n)), LabelSelector: s, MatchLabelKeys: []string{key},
				NetworkTopology: nt.DeepCopy()}
		}
		field := fmt.Sprintf("spec.replicatedJobs[%d] (%s)", i, rj.Name)
		switch {
		case by == hbv1alpha1.SubGroupByReplica || size == perJob:
			out = append(out, policy(rj.Name, perJob, sel(), jobsetv1alpha2.JobIndexKey))
		case size < perJob:
			if perJob%size != 0 {
				return nil, fmt.Errorf("annotation %s=%d does not divide the %d pods each Job of %s runs at once: choose a divisor or a multiple of %d", hbv1alpha1.SubGroupPodsAnnotation, size, perJob, field, perJob)
			}
			if m := rj.Template.Spec.CompletionMode; m != nil && *m != batchv1.IndexedCompletion {
				return nil, fmt.Errorf("%s: completionMode %s has no completion index to order pods by (annotation %s=%s): use completionMode Indexed, or %s=%s", field, *m,
					hbv1alpha1.SubGroupByAnnotation, hbv1alpha1.SubGroupByPods, hbv1alpha1.SubGroupByAnnotation, hbv1alpha1.SubGroupByReplica)
			}
			if c := rj.Template.Spec.Completions; c != nil && int64(*c) != perJob {
				return nil, fmt.Errorf("%s: completions %d is more than the %d pods each Job runs at once, so completion indexes past %d start later (annotation %s=%s): set parallelism equal to completions, or use %s=%s",
					field, *c, perJob, perJob-1, hbv1alpha1.SubGroupByAnnotation, hbv1alpha1.SubGroupByPods, hbv1alpha1.SubGroupByAnnotation, hbv1alpha1.SubGroupByReplica)
			}
			for b := int64(0); b < perJob/size; b++ {
				out = append(out, policy(fmt.Sprintf("%s-c%d", rj.Name, b), size,
					sel(in(completionIndexLabel, b*size, size)), jobsetv1alpha2.JobIndexKey))
			}
		default:
			total := int64(rj.Replicas) * perJob
			if size%perJob != 0 || total%size != 0 {
				return nil, fmt.Errorf("annotation %s=%d is neither a divisor nor a multiple of the %d pods each Job of %s runs at once, or does not divide its %d pods: choose one that is",
					hbv1alpha1.SubGroupPodsAnnotation, size, perJob, field, total)
			}
			jobs := size / perJob
			for b := int64(0); b < int64(rj.Replicas)/jobs; b++ {
				out = append(out, policy(fmt.Sprintf("%s-j%d", rj.Name, b), size,
					sel(in(jobsetv1alpha2.JobIndexKey, b*jobs, jobs)), jobsetv1alpha2.ReplicatedJobNameKey))
			}
		}
		if len(out) > maxSubGroupPolicies {
			return nil, fmt.Errorf("annotation %s: %d sub-group policies (one per block of completion indexes or Jobs) is more than %d: choose a larger %s, or %s=%s",
				hbv1alpha1.SubGroupByAnnotation, len(out), maxSubGroupPolicies, hbv1alpha1.SubGroupPodsAnnotation, hbv1alpha1.SubGroupByAnnotation, hbv1alpha1.SubGroupByReplica)
		}
	}
	return out, nil
}

// in selects the label key's values from..from+n-1.
func in(key string, from, n int64) metav1.LabelSelectorRequirement {
	vals := make([]string, 0, n)
	for v := from; v < from+n; v++ {
		vals = append(vals, strconv.FormatInt(v, 10))
	}
	return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: vals}
}
