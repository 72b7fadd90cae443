package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// NodeWrapper builds a Node: a name and its hostname label (ReadyStatus is the status a fake node
// reports).
type NodeWrapper struct{ corev1.Node }

// MakeNode is a Node with the kubernetes.io/hostname label.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}}
}

// Obj returns the Node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Taint adds a taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Label sets a label.
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Node.Labels[k] = v
	return w
}

// Labels sets labels.
func (w *NodeWrapper) Labels(l map[string]string) *NodeWrapper {
	for k, v := range l {
		w.Node.Labels[k] = v
	}
	return w
}

// Annotation sets an annotation.
func (w *NodeWrapper) Annotation(k, v string) *NodeWrapper {
	set(&w.Annotations, k, v)
	return w
}

// GPUNode is the capacity of the tests' fake GPU node: 64 CPUs, 256Gi, 110 pods, 8 GPUs.
func GPUNode() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), GPU: resource.MustParse("8"),
	}
}

// ReadyStatus is the status a kubelet would report for a Ready node with capacity (allocatable
// equal), as tests without a kubelet write it.
func ReadyStatus(capacity corev1.ResourceList) corev1.NodeStatus {
	return corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
}

// QueueWrapper builds a Volcano Queue (weight 1).
type QueueWrapper struct{ schedulingv1beta1.Queue }

// MakeQueue is an Open-by-default Volcano Queue of weight 1.
func MakeQueue(name string) *QueueWrapper {
	return &QueueWrapper{schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}}}
}

// Obj returns the Queue.
func (w *QueueWrapper) Obj() *schedulingv1beta1.Queue { return &w.Queue }

// Capability sets spec.capability.
func (w *QueueWrapper) Capability(c corev1.ResourceList) *QueueWrapper {
	w.Spec.Capability = c
	return w
}

// DequeueStrategy sets spec.dequeueStrategy.
func (w *QueueWrapper) DequeueStrategy(s schedulingv1beta1.DequeueStrategy) *QueueWrapper {
	w.Spec.DequeueStrategy = s
	return w
}

// Reclaimable sets spec.reclaimable.
func (w *QueueWrapper) Reclaimable(r bool) *QueueWrapper {
	w.Spec.Reclaimable = ptr.To(r)
	return w
}

// PodGroupWrapper builds a Volcano PodGroup.
type PodGroupWrapper struct{ schedulingv1beta1.PodGroup }

// MakePodGroup is a PodGroup with minMember 1.
func MakePodGroup(namespace, name string) *PodGroupWrapper {
	return &PodGroupWrapper{schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1}}}
}

// Obj returns the PodGroup.
func (w *PodGroupWrapper) Obj() *schedulingv1beta1.PodGroup { return &w.PodGroup }

// MinMember sets spec.minMember.
func (w *PodGroupWrapper) MinMember(n int32) *PodGroupWrapper {
	w.Spec.MinMember = n
	return w
}

// Queue sets spec.queue.
func (w *PodGroupWrapper) Queue(q string) *PodGroupWrapper {
	w.Spec.Queue = q
	return w
}

// MinGPUs sets spec.minResources to n GPUs (nothing for n <= 0).
func (w *PodGroupWrapper) MinGPUs(n int64) *PodGroupWrapper {
	if n > 0 {
		w.Spec.MinResources = &corev1.ResourceList{GPU: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	return w
}

// NetworkTopology sets spec.networkTopology.
func (w *PodGroupWrapper) NetworkTopology(nt *schedulingv1beta1.NetworkTopologySpec) *PodGroupWrapper {
	w.Spec.NetworkTopology = nt
	return w
}

// HardTier sets a hard network topology constraint up to tier.
func (w *PodGroupWrapper) HardTier(tier int) *PodGroupWrapper {
	return w.NetworkTopology(HardTier(tier))
}

// SoftTopology sets a soft network topology constraint.
func (w *PodGroupWrapper) SoftTopology() *PodGroupWrapper {
	return w.NetworkTopology(&schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.SoftNetworkTopologyMode})
}

// Owner sets an owner reference (nil: none).
func (w *PodGroupWrapper) Owner(ref *metav1.OwnerReference) *PodGroupWrapper {
	if ref != nil {
		w.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return w
}

// HardTier is a hard network topology constraint up to tier.
func HardTier(tier int) *schedulingv1beta1.NetworkTopologySpec {
	return &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(tier)}
}

// GangPodWrapper builds a pod of a gang: annotated with its PodGroup, terminating at once, one
// container asking for 100m CPU.
type GangPodWrapper struct{ corev1.Pod }

// MakeGangPod is a pod of group (the scheduling.k8s.io/group-name annotation; "" for none), for
// schedulerName, with one container "c" requesting 100m CPU.
func MakeGangPod(namespace, name, group, schedulerName string) *GangPodWrapper {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedulerName,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	if group != "" {
		p.Annotations = map[string]string{schedulingv1beta1.KubeGroupNameAnnotationKey: group}
	}
	return &GangPodWrapper{p}
}

// Obj returns the pod.
func (w *GangPodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Label sets a label.
func (w *GangPodWrapper) Label(k, v string) *GangPodWrapper {
	set(&w.Labels, k, v)
	return w
}

// NodeSelector restricts the pod to nodes labelled k=v.
func (w *GangPodWrapper) NodeSelector(k, v string) *GangPodWrapper {
	set(&w.Spec.NodeSelector, k, v)
	return w
}

// PriorityClass sets spec.priorityClassName (the API server's Priority admission fills spec.priority).
func (w *GangPodWrapper) PriorityClass(name string) *GangPodWrapper {
	w.Spec.PriorityClassName = name
	return w
}

// Image sets the container's image.
func (w *GangPodWrapper) Image(image string) *GangPodWrapper {
	w.Spec.Containers[0].Image = image
	return w
}

// GPUs makes the container request and limit n GPUs.
func (w *GangPodWrapper) GPUs(n int64) *GangPodWrapper {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	r := &w.Spec.Containers[0].Resources
	r.Requests[GPU] = q
	r.Limits = corev1.ResourceList{GPU: q}
	return w
}

// Requests replaces the container's requests.
func (w *GangPodWrapper) Requests(rl corev1.ResourceList) *GangPodWrapper {
	w.Spec.Containers[0].Resources.Requests = rl
	return w
}

// Limits replaces the container's limits.
func (w *GangPodWrapper) Limits(rl corev1.ResourceList) *GangPodWrapper {
	w.Spec.Containers[0].Resources.Limits = rl
	return w
}

// HyperNodeWrapper builds a Volcano HyperNode.
type HyperNodeWrapper struct{ topologyv1alpha1.HyperNode }

// MakeHyperNode is a HyperNode of tier with no members.
func MakeHyperNode(name string, tier int) *HyperNodeWrapper {
	return &HyperNodeWrapper{topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier}}}
}

// Obj returns the HyperNode.
func (w *HyperNodeWrapper) Obj() *topologyv1alpha1.HyperNode { return &w.HyperNode }

// TierName sets spec.tierName.
func (w *HyperNodeWrapper) TierName(n string) *HyperNodeWrapper {
	w.Spec.TierName = n
	return w
}

// Members appends members.
func (w *HyperNodeWrapper) Members(m ...topologyv1alpha1.MemberSpec) *HyperNodeWrapper {
	w.Spec.Members = append(w.Spec.Members, m...)
	return w
}

// NodeMember selects a node by name.
func NodeMember(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// RegexMember selects nodes whose name matches pattern.
func RegexMember(pattern string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: pattern}}}
}

// LabelMember selects nodes labelled k=v.
func LabelMember(k, v string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}}
}

// HyperNodeMember selects a child HyperNode by name.
func HyperNodeMember(name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: topologyv1alpha1.MemberTypeHyperNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// HyperNodeTree is a 3-tier tree over leaves (tier 1, each with its members): spines (tier 2) of
// perSpine leaves each, and one top (tier 3) over every spine. Names come from name(tier, index);
// tier names are rack, spine and zone. It returns every HyperNode, leaves first.
func HyperNodeTree(leaves [][]topologyv1alpha1.MemberSpec, perSpine int, name func(tier, i int) string) []*topologyv1alpha1.HyperNode {
	var out []*topologyv1alpha1.HyperNode
	for i, m := range leaves {
		out = append(out, MakeHyperNode(name(1, i), 1).TierName("rack").Members(m...).Obj())
	}
	var spines []topologyv1alpha1.MemberSpec
	for s := 0; s*perSpine < len(leaves); s++ {
		spine := MakeHyperNode(name(2, s), 2).TierName("spine")
		for i := s * perSpine; i < min((s+1)*perSpine, len(leaves)); i++ {
			spine.Members(HyperNodeMember(name(1, i)))
		}
		out = append(out, spine.Obj())
		spines = append(spines, HyperNodeMember(name(2, s)))
	}
	return append(out, MakeHyperNode(name(3, 0), 3).TierName("zone").Members(spines...).Obj())
}
