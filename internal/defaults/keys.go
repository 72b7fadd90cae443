package defaults

import (
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// Annotation and label keys (design.md section 5). Upstream keys are taken from upstream constants.
const (
	// QueueNameAnnotation is Volcano's queue on Pods, JobSets and Namespaces.
	QueueNameAnnotation = schedulingv1beta1.QueueNameAnnotationKey
	// GroupNameAnnotation makes a Pod a member of a Volcano PodGroup.
	GroupNameAnnotation = schedulingv1beta1.KubeGroupNameAnnotationKey
	// NetworkTopologyModeAnnotation is the pod-level topology mode, "hard" or "soft".
	NetworkTopologyModeAnnotation = topologyv1alpha1.NetworkTopologyModeAnnotationKey
	// NetworkTopologyHighestTierAnnotation is the pod-level highest tier, a decimal integer.
	NetworkTopologyHighestTierAnnotation = topologyv1alpha1.NetworkTopologyHighestTierAnnotationKey

	// HyperJobNameKey names the HyperJob that owns a child object.
	HyperJobNameKey = "volcano.sh/hyperjob-name"
	// ReplicatedJobNameKey names the replicatedJob a child object was made from.
	ReplicatedJobNameKey = "volcano.sh/replicatedjob-name"
	// VCJobTemplateSpecHashAnnotation is the SHA-256 of a child Volcano Job's template spec.
	VCJobTemplateSpecHashAnnotation = "volcano.sh/vcjob-template-spec-hash"
	// PPSpecHashAnnotation is the SHA-256 of a child PropagationPolicy's spec.
	PPSpecHashAnnotation = "volcano.sh/pp-spec-hash"

	// TTLSecondsAfterFinishedAnnotation carries the TTL on kinds without a native field (HyperJob).
	TTLSecondsAfterFinishedAnnotation = "hyperbatch.dev/ttl-seconds-after-finished"
	// ActiveDeadlineSecondsAnnotation carries the deadline on HyperJobs, JobSets and Volcano Jobs.
	ActiveDeadlineSecondsAnnotation = "hyperbatch.dev/active-deadline-seconds"
	// DefaultedByAnnotation says which source filled which fields (format in the package doc).
	DefaultedByAnnotation = "hyperbatch.dev/defaulted-by"
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
)

// fieldOrder is the canonical order of short field names inside one defaulted-by entry.
var fieldOrder = []string{
	FieldQueue, FieldPriorityClassName, FieldSchedulerName, FieldNetworkTopology,
	FieldTTLSecondsAfterFinished, FieldActiveDeadlineSeconds,
	FieldClusterNames, FieldReplicaScheduling, FieldSpreadConstraints, FieldPropagateDeps,
}

// Prefixes of the sources that are not policies; ':' cannot occur in a policy name.
const (
	namespaceSourcePrefix = "namespace:"
	jobSetSourcePrefix    = "jobset:"
)
