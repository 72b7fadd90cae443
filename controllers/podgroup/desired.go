package podgroup

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// DefaultQueue is Volcano's default queue, the PodGroup CRD's default for spec.queue.
const DefaultQueue = "default"

// Scheduler names whose pods are gang members.
const (
	HyperbatchSchedulerName = defaults.HyperbatchSchedulerName
	VolcanoSchedulerName    = defaults.VolcanoSchedulerName
)

// IsGang says whether a JobSet gets a PodGroup: defaults.JobSetIsGang, the rule the JobSet webhook
// also uses to put its pods in the gang.
func IsGang(js *jobsetv1alpha2.JobSet, ns defaults.Namespace, pols *defaults.Policies) bool {
	return defaults.JobSetIsGang(js, ns, pols)
}

// Finished says whether the JobSet ended Completed or Failed (the kind registry's
// workload.JobSetFinished: status.terminalState, or a true Completed/Failed condition).
func Finished(js *jobsetv1alpha2.JobSet) bool { return workload.JobSetFinished(js) }

// Suspended says whether spec.suspend is true (the kind registry's workload.JobSetSuspended).
func Suspended(js *jobsetv1alpha2.JobSet) bool { return workload.JobSetSuspended(js) }

// Desired builds the PodGroup the JobSet should have: the fields this controller owns and nothing
// else (it is an apply configuration, not a full object). The JobSet's own keys come first: its
// queue annotation, the first pod template's priorityClassName, the Volcano topology annotations on
// the JobSet, the sub-groups hyperbatch.dev/subgroup-by asks for (SubGroups); what is still empty comes from defaults.JobSetPodGroup, the PodGroup webhook's call
// (defaults.PodGroup) plus one rule: no policy topology for pods pinned to nodes. The Skips name
// the defaults left out that way.
func Desired(js *jobsetv1alpha2.JobSet, ns defaults.Namespace, pols *defaults.Policies, adm Admission) (*schedulingv1beta1.PodGroup, []defaults.Skip, error) {
	minMember, err := MinMember(js)
	if err != nil {
		return nil, nil, err
	}
	minRes, err := MinResources(js, adm)
	if err != nil {
		return nil, nil, err
	}
	pg := &schedulingv1beta1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name: js.Name, Namespace: js.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet", Name: js.Name, UID: js.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: schedulingv1beta1.PodGroupSpec{
			MinMember:    minMember,
			MinResources: &minRes,
			Queue:        defaults.NormalizeQueue(js.Annotations[defaults.QueueNameAnnotation]),
		},
	}
	if minRes == nil {
		pg.Spec.MinResources = nil
	}
	for i := range js.Spec.ReplicatedJobs {
		if pc := js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.PriorityClassName; pc != "" {
			pg.Spec.PriorityClassName = pc
			break
		}
	}
	if mode := js.Annotations[defaults.NetworkTopologyModeAnnotation]; mode != "" {
		nt := &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.NetworkTopologyMode(mode)}
		if nt.Mode != schedulingv1beta1.HardNetworkTopologyMode && nt.Mode != schedulingv1beta1.SoftNetworkTopologyMode {
			// The PodGroup CRD's enum would refuse the apply on every retry; say so once instead.
			return nil, nil, fmt.Errorf("annotation %s=%q is not %q or %q: set one of them, or remove it", defaults.NetworkTopologyModeAnnotation, mode,
				schedulingv1beta1.HardNetworkTopologyMode, schedulingv1beta1.SoftNetworkTopologyMode)
		}
		if v := js.Annotations[defaults.NetworkTopologyHighestTierAnnotation]; v != "" {
			tier, err := strconv.Atoi(v)
			if err != nil || tier < 1 {
				return nil, nil, fmt.Errorf("annotation %s=%q is not a positive integer: set the highest HyperNode tier the gang may span, or remove it", defaults.NetworkTopologyHighestTierAnnotation, v)
			}
			nt.HighestTierAllowed = &tier
		}
		pg.Spec.NetworkTopology = nt
	}
	if pg.Spec.SubGroupPolicy, err = SubGroups(js); err != nil {
		return nil, nil, err
	}
	res := defaults.JobSetPodGroup(pg, js, ns, pols)
	if pg.Spec.Queue == "" {
		// The PodGroup CRD defaults spec.queue to Volcano's "default" queue; asking for it outright
		// keeps the stored PodGroup equal to the desired one (otherwise every resync would apply).
		pg.Spec.Queue = DefaultQueue
	}
	return pg, res.Skips, nil
}

// UpToDate says whether the observed PodGroup already carries every value of want, so an apply would
// change nothing: only the fields this controller owns are compared.
func UpToDate(want, have *schedulingv1beta1.PodGroup) bool {
	if !metav1.IsControlledBy(have, &metav1.ObjectMeta{UID: want.OwnerReferences[0].UID}) {
		return false
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return false
		}
	}
	w, h := &want.Spec, &have.Spec
	return w.MinMember == h.MinMember && w.Queue == h.Queue && w.PriorityClassName == h.PriorityClassName &&
		sameResources(w.MinResources, h.MinResources) &&
		equality.Semantic.DeepEqual(w.NetworkTopology, h.NetworkTopology) &&
		equality.Semantic.DeepEqual(w.SubGroupPolicy, h.SubGroupPolicy)
}

// formatResources renders a resource list in a stable order ("cpu=1250m, memory=2Gi"; "none").
func formatResources(l *corev1.ResourceList) string {
	if l == nil || len(*l) == 0 {
		return "none"
	}
	names := make([]string, 0, len(*l))
	for n := range *l {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := (*l)[corev1.ResourceName(n)]
		parts = append(parts, n+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

func sameResources(a, b *corev1.ResourceList) bool {
	var x, y corev1.ResourceList
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	if len(x) != len(y) {
		return false
	}
	for name, q := range x {
		o, ok := y[name]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}
