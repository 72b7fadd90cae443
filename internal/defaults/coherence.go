package defaults

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// Coherent defaults: a default that would contradict what the workload says is left out and
// reported as a Skip, which names both sides. No field is overwritten either way; a Skip keeps the
// user's intent, which a filled default would otherwise silently change.
//
//   - A cluster spread cap (propagation.maxClusters) below the number of clusters the
//     PropagationPolicy itself names for its replicas: a Weighted division's staticWeightList, or
//     the clusterNames of a Duplicated placement.
//   - A network-topology tier bound on a workload that pins its pods to nodes (spec.nodeName, or a
//     required node affinity that names nodes): the user chose the nodes, and a tier bound they
//     do not fit would leave the gang pending for good.
//   - A Job-level schedulerName on a Volcano Job (or a HyperJob's templateSpec) whose task templates
//     name another scheduler: Volcano's job controller gives the Job's scheduler only to pods whose
//     template names none, so the policy's scheduler would take the gang (its PodGroup) while the
//     pods wait for a scheduler that never sees their gang.

// skip records a default left out.
func (r *run) skip(path, field, def, conflict string) {
	r.res.Skips = append(r.res.Skips, Skip{Path: path, Field: field, Default: def, Source: r.policySource(), Conflict: conflict})
}

// String is the Skip in words, e.g. `spec.placement.spreadConstraints (maxClusters 1 from
// WorkloadPolicy p) was not defaulted: it contradicts ...`.
func (s Skip) String() string {
	return fmt.Sprintf("%s (%s from WorkloadPolicy %s) was not defaulted: it would contradict %s", s.Path, s.Default, s.Source.Name, s.Conflict)
}

// topologyDescription is a policy topology in words, e.g. "networkTopology hard, highestTierAllowed 1".
func topologyDescription(nt *hbv1.NetworkTopology) string {
	out := "networkTopology " + string(topologyMode(nt))
	if nt.HighestTierAllowed != nil {
		out += ", highestTierAllowed " + strconv.FormatInt(int64(*nt.HighestTierAllowed), 10)
	}
	if nt.HighestTierName != "" {
		out += ", highestTierName " + nt.HighestTierName
	}
	return out
}

// pinnedNodes describes how a pod spec pins its pods to nodes ("" when it does not): spec.nodeName,
// a nodeSelector on kubernetes.io/hostname, or a required node affinity each of whose terms names
// nodes (metadata.name or kubernetes.io/hostname, operator In). path is the pod spec's path.
func pinnedNodes(spec *corev1.PodSpec, path string) string {
	if spec == nil {
		return ""
	}
	if spec.NodeName != "" {
		return fmt.Sprintf("%s.nodeName %q", path, spec.NodeName)
	}
	if h := spec.NodeSelector[corev1.LabelHostname]; h != "" {
		return fmt.Sprintf("%s.nodeSelector[%s] %q", path, corev1.LabelHostname, h)
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return ""
	}
	var nodes []string
	for _, t := range terms {
		named := termNodes(t)
		if named == nil {
			return "" // this term admits nodes by other properties: not pinned
		}
		nodes = append(nodes, named...)
	}
	return fmt.Sprintf("%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (nodes %s)", path, strings.Join(nodes, ", "))
}

// termNodes are the node names a required node selector term restricts to, nil when it names none.
func termNodes(t corev1.NodeSelectorTerm) []string {
	for _, f := range t.MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) > 0 {
			return f.Values
		}
	}
	for _, e := range t.MatchExpressions {
		if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) > 0 {
			return e.Values
		}
	}
	return nil
}

// jobPinnedNodes is pinnedNodes of the first task of a Volcano JobSpec that pins its pods.
func jobPinnedNodes(spec *batchv1alpha1.JobSpec, prefix string) string {
	for i := range spec.Tasks {
		if p := pinnedNodes(&spec.Tasks[i].Template.Spec, prefix+".tasks["+strconv.Itoa(i)+"].template.spec"); p != "" {
			return p
		}
	}
	return ""
}

// jobTaskScheduler describes the first task template of a Volcano JobSpec that names a scheduler
// other than def ("" when none does), e.g. `spec.tasks[0].template.spec.schedulerName "volcano"`.
func jobTaskScheduler(spec *batchv1alpha1.JobSpec, prefix, def string) string {
	for i := range spec.Tasks {
		if n := spec.Tasks[i].Template.Spec.SchedulerName; n != "" && n != def {
			return fmt.Sprintf("%s.tasks[%d].template.spec.schedulerName %q", prefix, i, n)
		}
	}
	return ""
}

// jobSetPinnedNodes is pinnedNodes of the first pod template of a JobSet that pins its pods.
func jobSetPinnedNodes(js *jobsetv1alpha2.JobSet) string {
	if js == nil {
		return ""
	}
	for i := range js.Spec.ReplicatedJobs {
		path := "spec.replicatedJobs[" + strconv.Itoa(i) + "].template.spec.template.spec"
		if p := pinnedNodes(&js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec, "JobSet "+path); p != "" {
			return p
		}
	}
	return ""
}

// namedClusters are the clusters a PropagationPolicy's placement itself places replicas on, and the
// field that names them: the targets of a Weighted division's staticWeightList, or the
// clusterNames of a Duplicated placement. nil when it names none this way.
func namedClusters(pl *policyv1alpha1.Placement) (clusters []string, where string) {
	rs := pl.ReplicaScheduling
	if rs == nil {
		return nil, ""
	}
	if rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		if pl.ClusterAffinity != nil && len(pl.ClusterAffinity.ClusterNames) > 0 {
			return uniq(pl.ClusterAffinity.ClusterNames), "spec.placement.clusterAffinity.clusterNames with replicaSchedulingType Duplicated"
		}
		return nil, ""
	}
	if rs.ReplicaDivisionPreference != policyv1alpha1.ReplicaDivisionPreferenceWeighted || rs.WeightPreference == nil {
		return nil, ""
	}
	for _, w := range rs.WeightPreference.StaticWeightList {
		if w.Weight > 0 {
			clusters = append(clusters, w.TargetCluster.ClusterNames...)
		}
	}
	return uniq(clusters), "the Weighted division in spec.placement.replicaScheduling.weightPreference.staticWeightList"
}

func uniq(l []string) []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}
