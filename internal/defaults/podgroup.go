package defaults

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// PodGroup fills a Volcano PodGroup's spec.queue, priorityClassName and networkTopology where unset.
func PodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies) Result {
	return fillPodGroup(pg, ns, pols, "", nil)
}

// TrainerPodGroup is PodGroup for the PodGroup Kubeflow Trainer made for a TrainJob
// (podGroupPolicy.volcano; TrainJobOwned): besides the policy's defaults, spec.minResources is kept
// at the hyperbatch.dev/priced-min-resources annotation the podgroup controller wrote (the JobSet's
// pods priced as admitted), where Trainer's own sum of the templates' requests differs.
func TrainerPodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies) Result {
	return fillPodGroup(pg, ns, pols, "", func(r *run) {
		v, ok := pg.Annotations[hbv1.PricedMinResourcesAnnotation]
		if !ok {
			return
		}
		priced, err := ParseResourceList(v)
		if err != nil || SameResourceList(pg.Spec.MinResources, priced) {
			return
		}
		pg.Spec.MinResources = &priced
		r.record("spec.minResources", FieldMinResources, Source{Kind: SourceJobSet, Name: pg.Name})
	})
}

// FormatResourceList is a ResourceList as "cpu=800m,memory=128Mi" (names sorted).
func FormatResourceList(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := l[corev1.ResourceName(n)]
		parts[i] = n + "=" + q.String()
	}
	return strings.Join(parts, ",")
}

// ParseResourceList reads FormatResourceList's form.
func ParseResourceList(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=quantity", part)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[corev1.ResourceName(strings.TrimSpace(name))] = q
	}
	return out, nil
}

// SameResourceList reports whether *a and b hold equal quantities of the same resources.
func SameResourceList(a *corev1.ResourceList, b corev1.ResourceList) bool {
	var x corev1.ResourceList
	if a != nil {
		x = *a
	}
	if len(x) != len(b) {
		return false
	}
	for n, q := range b {
		if p, ok := x[n]; !ok || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// JobSetPodGroup is PodGroup for the PodGroup of JobSet js: a policy's networkTopology is left out
// (a Skip) when one of the JobSet's pod templates pins its pods to nodes, as for a Pod or a Volcano Job.
func JobSetPodGroup(pg *schedulingv1beta1.PodGroup, js *jobsetv1alpha2.JobSet, ns Namespace, pols *Policies) Result {
	return fillPodGroup(pg, ns, pols, jobSetPinnedNodes(js), nil)
}

// fillPodGroup is PodGroup; pinned describes how the gang's pods are pinned to nodes ("" when not);
// extra, when set, fills more before the defaulted-by record is written.
func fillPodGroup(pg *schedulingv1beta1.PodGroup, ns Namespace, pols *Policies, pinned string, extra func(*run)) Result {
	if pg == nil {
		return Result{}
	}
	r := begin(ns, pols)
	d := r.defaults()
	r.fillSpecQueue(&pg.Spec.Queue, "spec.queue")
	r.fillString(&pg.Spec.PriorityClassName, d.PriorityClassName, "spec.priorityClassName", FieldPriorityClassName)
	if pg.Spec.NetworkTopology == nil && d.NetworkTopology != nil {
		if pinned != "" {
			r.skip("spec.networkTopology", FieldNetworkTopology, topologyDescription(d.NetworkTopology), pinned)
		} else {
			pg.Spec.NetworkTopology = podGroupTopology(d.NetworkTopology)
			r.record("spec.networkTopology", FieldNetworkTopology, r.policySource())
		}
	}
	if extra != nil {
		extra(r)
	}
	return r.finish(&pg.ObjectMeta)
}

// podGroupTopology converts a policy's network topology to Volcano's scheduling form.
func podGroupTopology(nt *hbv1.NetworkTopology) *schedulingv1beta1.NetworkTopologySpec {
	out := &schedulingv1beta1.NetworkTopologySpec{
		Mode:            schedulingv1beta1.NetworkTopologyMode(topologyMode(nt)),
		HighestTierName: nt.HighestTierName,
	}
	if nt.HighestTierAllowed != nil {
		tier := int(*nt.HighestTierAllowed)
		out.HighestTierAllowed = &tier
	}
	return out
}

// VolcanoJobPodGroup fills the PodGroup that Volcano's job controller made for Volcano Job job from
// the Job alone, never from a policy or the namespace: the PodGroup follows its Job, so the queue
// and topology the scheduler sees are the ones the Job was admitted with. Where the PodGroup leaves
// them unset it gets the Job's spec.queue (the PodGroup CRD's "default" counts as unset, as for
// PodGroup), priorityClassName and networkTopology; and when the PodGroup has the Job's topology
// without its highestTierName (Volcano v1.14's job controller copies only mode and
// highestTierAllowed), it gets the Job's highestTierName; a PodGroup without subGroupPolicy gets
// the sub-groups of the Job's tasks' partitionPolicy (VolcanoJobSubGroups), which the pinned
// controller (v1.14.0-alpha.0) does not write. Nothing the PodGroup sets is overwritten.
// The source is the Job (SourceVolcanoJob). A nil job or pg changes nothing.
func VolcanoJobPodGroup(pg *schedulingv1beta1.PodGroup, job *batchv1alpha1.Job) Result {
	if pg == nil || job == nil {
		return Result{}
	}
	r := &run{}
	src := Source{Kind: SourceVolcanoJob, Name: job.Name}
	if q := NormalizeQueue(job.Spec.Queue); q != "" && queueUnsetInSpec(pg.Spec.Queue) && NormalizeQueue(pg.Spec.Queue) != q {
		pg.Spec.Queue = q
		r.record("spec.queue", FieldQueue, src)
	}
	if pg.Spec.PriorityClassName == "" && job.Spec.PriorityClassName != "" {
		pg.Spec.PriorityClassName = job.Spec.PriorityClassName
		r.record("spec.priorityClassName", FieldPriorityClassName, src)
	}
	if jt := job.Spec.NetworkTopology; jt != nil {
		switch pt := pg.Spec.NetworkTopology; {
		case pt == nil:
			pg.Spec.NetworkTopology = &schedulingv1beta1.NetworkTopologySpec{
				Mode:               schedulingv1beta1.NetworkTopologyMode(jt.Mode),
				HighestTierAllowed: cloneInt(jt.HighestTierAllowed),
				HighestTierName:    jt.HighestTierName,
			}
			r.record("spec.networkTopology", FieldNetworkTopology, src)
		case pt.HighestTierName == "" && jt.HighestTierName != "" && string(pt.Mode) == string(jt.Mode):
			nt := *pt // a new value: pg may share its pointers with another object
			nt.HighestTierName = jt.HighestTierName
			pg.Spec.NetworkTopology = &nt
			r.record("spec.networkTopology.highestTierName", FieldNetworkTopology, src)
		}
	}
	if len(pg.Spec.SubGroupPolicy) == 0 {
		if sg := VolcanoJobSubGroups(job); len(sg) > 0 {
			pg.Spec.SubGroupPolicy = sg
			r.record("spec.subGroupPolicy", FieldSubGroupPolicy, src)
		}
	}
	return r.finish(&pg.ObjectMeta)
}

// VolcanoJobOwner is the controller reference of a PodGroup that Volcano's job controller made for a
// Volcano Job (batch.volcano.sh/v1alpha1 Job), nil when the PodGroup has no such owner.
func VolcanoJobOwner(pg *schedulingv1beta1.PodGroup) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pg)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1alpha1.SchemeGroupVersion.String() {
		return nil
	}
	return ref
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
