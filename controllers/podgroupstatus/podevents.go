package podgroupstatus

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// memberPodChanges passes the pod events that can change a PodGroup's status: a member pod
// (scheduling.k8s.io/group-name annotation) created or deleted, and an update of a member pod that
// changes something the status is computed from or that names the pod's PodGroup (memberPodUpdated).
// Every other pod update of the cluster (kubelet container statuses, readiness, probes, resize
// status, labels) and every event of a pod of no PodGroup is dropped before the map function runs.
var memberPodChanges = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return groupOf(e.Object) != "" },
	DeleteFunc:  func(e event.DeleteEvent) bool { return groupOf(e.Object) != "" },
	GenericFunc: func(e event.GenericEvent) bool { return groupOf(e.Object) != "" },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true // not a typed pod: let the reconcile decide
		}
		return memberPodUpdated(o, n)
	},
}

// memberPodUpdated says whether an update of a pod can change its PodGroup's status or membership:
// it is (or was) a member and one of the fields countPods and served read changed: the group-name
// annotation (the pod moves between PodGroups: both are enqueued), spec.schedulerName,
// spec.nodeName (bound), status.phase (the Running/Succeeded/Failed counts, allocated, active), the
// PodScheduled condition (the GangWaiting message and its transition time), or the start of the
// pod's deletion (not read by the status today; rare, so let through).
func memberPodUpdated(o, n *corev1.Pod) bool {
	og, ng := groupOf(o), groupOf(n)
	if og == "" && ng == "" {
		return false
	}
	return og != ng ||
		o.Spec.SchedulerName != n.Spec.SchedulerName ||
		o.Spec.NodeName != n.Spec.NodeName ||
		o.Status.Phase != n.Status.Phase ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		!equality.Semantic.DeepEqual(scheduledConditions(o), scheduledConditions(n))
}

// groupOf is the PodGroup a pod names (empty for a pod of no PodGroup).
func groupOf(o interface{ GetAnnotations() map[string]string }) string {
	return o.GetAnnotations()[schedulingv1beta1.KubeGroupNameAnnotationKey]
}

// scheduledConditions are the pod's PodScheduled conditions, whole (status, reason, message and
// both times): countPods reads their status, message and transition time.
func scheduledConditions(p *corev1.Pod) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out = append(out, c)
		}
	}
	return out
}
