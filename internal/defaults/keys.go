package defaults

import (
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// Upstream annotation keys the engine fills, taken from upstream constants. The keys hyperbatch
// owns are in api/v1alpha1 (keys.go).
const (
	// QueueNameAnnotation is Volcano's queue on Pods, JobSets and Namespaces.
	QueueNameAnnotation = schedulingv1beta1.QueueNameAnnotationKey
	// GroupNameAnnotation makes a Pod a member of a Volcano PodGroup.
	GroupNameAnnotation = schedulingv1beta1.KubeGroupNameAnnotationKey
	// NetworkTopologyModeAnnotation is the pod-level topology mode, "hard" or "soft".
	NetworkTopologyModeAnnotation = topologyv1alpha1.NetworkTopologyModeAnnotationKey
	// NetworkTopologyHighestTierAnnotation is the pod-level highest tier, a decimal integer.
	NetworkTopologyHighestTierAnnotation = topologyv1alpha1.NetworkTopologyHighestTierAnnotationKey
)

// Short field names used in the defaulted-by annotation, in the order they are written.
const (
	FieldQueue                   = "queue"
	FieldPriorityClassName       = "priorityClassName"
	FieldSchedulerName           = "schedulerName"
	FieldNetworkTopology         = "networkTopology"
	FieldTTLSecondsAfterFinished = "ttlSecondsAfterFinished"
	FieldActiveDeadlineSeconds   = "activeDeadlineSeconds"
	FieldClusterNames            = "clusterNames"
	FieldReplicaScheduling       = "replicaScheduling"
	FieldSpreadConstraints       = "spreadConstraints"
	FieldPropagateDeps           = "propagateDeps"
	FieldGroupName               = "groupName"
	FieldMinResources            = "minResources"
	FieldSubGroupPolicy          = "subGroupPolicy"
)

// fieldOrder is the canonical order of short field names inside one defaulted-by entry.
var fieldOrder = []string{
	FieldQueue, FieldPriorityClassName, FieldSchedulerName, FieldNetworkTopology,
	FieldTTLSecondsAfterFinished, FieldActiveDeadlineSeconds,
	FieldClusterNames, FieldReplicaScheduling, FieldSpreadConstraints, FieldPropagateDeps,
	FieldGroupName, FieldMinResources, FieldSubGroupPolicy,
}

// Prefixes of the sources that are not policies; ':' cannot occur in a policy name.
const (
	namespaceSourcePrefix  = "namespace:"
	jobSetSourcePrefix     = "jobset:"
	volcanoJobSourcePrefix = "vcjob:"
)
