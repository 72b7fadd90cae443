package podgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// subGroupsOf matches the pods the JobSet and Job controllers would create (their labels) to the
// policies as Volcano v1.14 does (the first policy whose selector matches and whose matchLabelKeys
// all have values; the values name the sub-group) and returns, per sub-group, its pods' "job/index".
func subGroupsOf(t *testing.T, js *jobsetv1alpha2.JobSet, pols []schedulingv1beta1.SubGroupPolicySpec) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		for j := 0; j < int(rj.Replicas); j++ {
			for c := 0; c < int(podsAtOnce(&rj)); c++ {
				l := labels.Set{jobsetv1alpha2.ReplicatedJobNameKey: rj.Name, jobsetv1alpha2.JobIndexKey: strconv.Itoa(j), completionIndexLabel: strconv.Itoa(c)}
				for _, p := range pols {
					sel, err := metav1.LabelSelectorAsSelector(p.LabelSelector)
					require.NoError(t, err)
					if !sel.Matches(l) {
						continue
					}
					var vals []string
					for _, k := range p.MatchLabelKeys {
						vals = append(vals, l[k])
					}
					key := fmt.Sprintf("%s[%s]/%d", p.Name, strings.Join(vals, "/"), *p.SubGroupSize)
					out[key] = append(out[key], fmt.Sprintf("%s-%d/%d", rj.Name, j, c))
					break
				}
			}
		}
	}
	return out
}

func keys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestSubGroupsByReplicaAndByPods(t *testing.T) {
	one := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	ann := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	by, pods := hbv1.SubGroupByAnnotation, hbv1.SubGroupPodsAnnotation

	// By replica: each Job of each replicatedJob is one sub-group of its pods at once.
	js := jobset(ann(by, "replica", hbv1.SubGroupHighestTierAnnotation, "1"),
		rjob("launcher", 1, nil, nil, one), rjob("workers", 2, ptr.To[int32](4), ptr.To[int32](4), one))
	pols, err := SubGroups(js)
	require.NoError(t, err)
	got := subGroupsOf(t, js, pols)
	assert.Equal(t, []string{"launcher[0]/1", "workers[0]/4", "workers[1]/4"}, keys(got))
	assert.Equal(t, []string{"workers-1/0", "workers-1/1", "workers-1/2", "workers-1/3"}, got["workers[1]/4"])
	require.NotNil(t, pols[1].NetworkTopology)
	assert.Equal(t, schedulingv1beta1.HardNetworkTopologyMode, pols[1].NetworkTopology.Mode)
	assert.Equal(t, 1, *pols[1].NetworkTopology.HighestTierAllowed)

	// By 2 pods, Jobs of 4: each half of each Job, in completion-index order.
	js = jobset(ann(by, "pods", pods, "2"), rjob("workers", 2, ptr.To[int32](4), ptr.To[int32](4), one))
	pols, err = SubGroups(js)
	require.NoError(t, err)
	got = subGroupsOf(t, js, pols)
	assert.Equal(t, []string{"workers-c0[0]/2", "workers-c0[1]/2", "workers-c1[0]/2", "workers-c1[1]/2"}, keys(got))
	assert.Equal(t, []string{"workers-1/2", "workers-1/3"}, got["workers-c1[1]/2"])
	assert.Nil(t, pols[0].NetworkTopology)

	// By 4 pods, Jobs of 2: each two Jobs.
	js = jobset(ann(by, "pods", pods, "4"), rjob("workers", 4, ptr.To[int32](2), nil, one))
	pols, err = SubGroups(js)
	require.NoError(t, err)
	got = subGroupsOf(t, js, pols)
	assert.Equal(t, []string{"workers-j0[workers]/4", "workers-j1[workers]/4"}, keys(got))
	assert.Equal(t, []string{"workers-2/0", "workers-2/1", "workers-3/0", "workers-3/1"}, got["workers-j1[workers]/4"])

	// No annotation: no sub-groups.
	pols, err = SubGroups(jobset(nil, rjob("workers", 2, nil, nil, one)))
	require.NoError(t, err)
	assert.Nil(t, pols)
}

func TestSubGroupsRefusals(t *testing.T) {
	one := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	by, pods := hbv1.SubGroupByAnnotation, hbv1.SubGroupPodsAnnotation
	four := rjob("workers", 3, ptr.To[int32](4), ptr.To[int32](4), one)
	nonIndexed := rjob("workers", 2, ptr.To[int32](4), ptr.To[int32](4), one)
	nonIndexed.Template.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		rj   jobsetv1alpha2.ReplicatedJob
		want string
	}{
		{"unknown by", map[string]string{by: "rank"}, four, `annotation hyperbatch.dev/subgroup-by="rank" is not "replica" or "pods"`},
		{"pods without size", map[string]string{by: "pods"}, four, `annotation hyperbatch.dev/subgroup-pods="" is not a positive integer`},
		{"size without by", map[string]string{pods: "2"}, four, "annotation hyperbatch.dev/subgroup-pods is set without hyperbatch.dev/subgroup-by"},
		{"size with replica", map[string]string{by: "replica", pods: "2"}, four, `annotation hyperbatch.dev/subgroup-pods="2" is for hyperbatch.dev/subgroup-by=pods`},
		{"no divisor", map[string]string{by: "pods", pods: "3"}, four, "annotation hyperbatch.dev/subgroup-pods=3 does not divide the 4 pods each Job of spec.replicatedJobs[0] (workers)"},
		{"not a multiple's divisor", map[string]string{by: "pods", pods: "8"}, four, "does not divide its 12 pods"},
		{"non-indexed", map[string]string{by: "pods", pods: "2"}, nonIndexed, "completionMode NonIndexed has no completion index"},
		{"bad mode", map[string]string{by: "replica", hbv1.SubGroupNetworkTopologyModeAnnotation: "strict"}, four, `annotation hyperbatch.dev/subgroup-network-topology-mode="strict" is not "hard" or "soft"`},
		{"bad tier", map[string]string{by: "replica", hbv1.SubGroupHighestTierAnnotation: "0"}, four, `annotation hyperbatch.dev/subgroup-highest-tier="0" is not a positive integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SubGroups(jobset(tc.ann, tc.rj))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The JobSet examples (examples/subgroups) give the sub-groups their comments promise.
func TestSubGroupExamples(t *testing.T) {
	for file, want := range map[string][]string{
		"jobset-by-replica.yaml": {"workers[0]/4", "workers[1]/4"},
		"jobset-by-pods.yaml":    {"workers-c0[0]/4", "workers-c1[0]/4"},
	} {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "subgroups", file))
			require.NoError(t, err)
			js := &jobsetv1alpha2.JobSet{}
			require.NoError(t, yaml.UnmarshalStrict(raw, js))
			pols, err := SubGroups(js)
			require.NoError(t, err)
			assert.Equal(t, want, keys(subGroupsOf(t, js, pols)))
			for _, p := range pols {
				require.NotNil(t, p.NetworkTopology)
				assert.Equal(t, 1, *p.NetworkTopology.HighestTierAllowed)
			}
		})
	}
}

// A TrainJob's JobSet (Trainer's shape: one replicatedJob of numNodes pods, a node's rank its
// completion index) takes its sub-groups from the TrainJob's annotations: each N ranks in rank order
// with "pods"; the JobSet's own annotations (from the runtime's template) only when the TrainJob sets
// none, never mixed; a bad one is an error naming the TrainJob.
func TestTrainJobSubGroups(t *testing.T) {
	one := corev1.PodSpec{Containers: []corev1.Container{{Name: "node"}}}
	js := jobset(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByReplica, hbv1.SubGroupHighestTierAnnotation: "2"},
		rjob("node", 1, ptr.To[int32](8), ptr.To[int32](8), one))
	tj := defaults.NewTrainJob()
	tj.SetName("llm")
	tj.SetAnnotations(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByPods, hbv1.SubGroupPodsAnnotation: "4"})

	pols, err := trainJobSubGroups(js, tj)
	require.NoError(t, err)
	assert.Equal(t, []string{"node-c0[0]/4", "node-c1[0]/4"}, keys(subGroupsOf(t, js, pols)))
	for _, p := range pols {
		assert.Nil(t, p.NetworkTopology, "the JobSet's subgroup-highest-tier was mixed into the TrainJob's ask")
	}
	shaped := withSubGroupAnnotations(js, tj)
	assert.Equal(t, "pods", shaped.Annotations[hbv1.SubGroupByAnnotation])
	assert.NotContains(t, shaped.Annotations, hbv1.SubGroupHighestTierAnnotation)
	assert.Equal(t, "replica", js.Annotations[hbv1.SubGroupByAnnotation], "the JobSet itself was changed")

	// No sub-group annotation on the TrainJob: the JobSet's own hold.
	tj.SetAnnotations(map[string]string{"other": "x"})
	pols, err = trainJobSubGroups(js, tj)
	require.NoError(t, err)
	assert.Equal(t, []string{"node[0]/8"}, keys(subGroupsOf(t, js, pols)))

	tj.SetAnnotations(map[string]string{hbv1.SubGroupByAnnotation: hbv1.SubGroupByPods, hbv1.SubGroupPodsAnnotation: "3"})
	_, err = trainJobSubGroups(js, tj)
	require.EqualError(t, err, "TrainJob llm: annotation hyperbatch.dev/subgroup-pods=3 does not divide the 8 pods each Job of spec.replicatedJobs[0] (node) runs at once: choose a divisor or a multiple of 8")
}
