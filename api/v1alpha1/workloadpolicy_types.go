package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkTopologyMode says whether a gang's topology limit may be relaxed.
// +kubebuilder:validation:Enum=hard;soft
type NetworkTopologyMode string

const (
	// NetworkTopologyHard never places a gang above the allowed tier.
	NetworkTopologyHard NetworkTopologyMode = "hard"
	// NetworkTopologySoft prefers the allowed tier and falls back upward to the whole cluster.
	NetworkTopologySoft NetworkTopologyMode = "soft"
)

// NetworkTopology is the network-domain constraint defaulted into gang workloads. It has the meaning
// of Volcano's networkTopology: a lower tier is a tighter domain.
// +kubebuilder:validation:XValidation:rule="!(has(self.highestTierAllowed) && has(self.highestTierName))",message="set highestTierAllowed or highestTierName, not both"
type NetworkTopology struct {
	// Mode is hard (never cross the limit) or soft (prefer it). Defaults to hard.
	// +kubebuilder:default=hard
	// +optional
	Mode NetworkTopologyMode `json:"mode,omitempty"`

	// HighestTierAllowed is the highest HyperNode tier a gang may span.
	// +kubebuilder:validation:Minimum=1
	// +optional
	HighestTierAllowed *int32 `json:"highestTierAllowed,omitempty"`

	// HighestTierName names the highest tier a gang may span (a tierName of the HyperNode tree).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == self.trim()",message="a tier name has no spaces around it: write the HyperNode tierName exactly"
	// +optional
	HighestTierName string `json:"highestTierName,omitempty"`
}

// ReplicaDivisionPreference is how Karmada divides replicas among member clusters.
// +kubebuilder:validation:Enum=Aggregated;Weighted
type ReplicaDivisionPreference string

// Propagation holds Karmada PropagationPolicy defaults.
type Propagation struct {
	// ClusterNames are the member clusters workloads may be propagated to.
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="a Karmada cluster name has lowercase letters, digits and '-', starts and ends with a letter or digit and has no spaces, such as 'member1': remove the spaces or correct the name"
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`

	// ReplicaDivisionPreference is Aggregated (fewest clusters) or Weighted.
	// +optional
	ReplicaDivisionPreference ReplicaDivisionPreference `json:"replicaDivisionPreference,omitempty"`

	// MaxClusters caps how many clusters one workload spreads over (a cluster spread constraint).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxClusters *int32 `json:"maxClusters,omitempty"`

	// PropagateDeps propagates the workload's ConfigMaps, Secrets and other dependencies with it.
	// +optional
	PropagateDeps *bool `json:"propagateDeps,omitempty"`
}

// PolicyDefaults are the values a WorkloadPolicy fills into workloads that leave them empty.
type PolicyDefaults struct {
	// Queue is the Volcano queue, as a plain name or in Volcano's "namespace/<name>" form.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=263
	// +kubebuilder:validation:XValidation:rule="self.matches('^(namespace/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="a Volcano queue name has lowercase letters, digits, '-' and '.', starts and ends with a letter or digit and has no spaces, such as 'team-a', optionally after 'namespace/' for a NamespaceQueue: remove the spaces or correct the name"
	// +optional
	Queue string `json:"queue,omitempty"`

	// PriorityClassName is the PriorityClass given to pods and gangs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="a PriorityClass name has lowercase letters, digits, '-' and '.', starts and ends with a letter or digit and has no spaces, such as 'batch-high': remove the spaces or correct the name"
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// SchedulerName is the scheduler given to pods, e.g. hyperbatch-scheduler or volcano.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="a scheduler name has lowercase letters, digits, '-' and '.', starts and ends with a letter or digit and has no spaces, such as 'hyperbatch-scheduler': remove the spaces or correct the name"
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// NetworkTopology is the network-domain constraint given to gangs.
	// +optional
	NetworkTopology *NetworkTopology `json:"networkTopology,omitempty"`

	// Gang, when true, makes every JobSet in governed namespaces a gang: hyperbatch's podgroup
	// controller gives it a Volcano PodGroup. False or unset leaves the choice to the JobSet (its
	// schedulerName or Volcano queue annotation). A JobSet opts out with hyperbatch.dev/gang: "false".
	// +optional
	Gang *bool `json:"gang,omitempty"`

	// TTLSecondsAfterFinished deletes finished workloads after this many seconds.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ActiveDeadlineSeconds fails workloads that run longer than this.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// Propagation holds Karmada PropagationPolicy defaults for multi-cluster workloads.
	// +optional
	Propagation *Propagation `json:"propagation,omitempty"`
}

// WorkloadPolicySpec says which namespaces a policy governs, what it defaults and what it allows.
// Its namespaceSelector is checked by the ValidatingAdmissionPolicy hyperbatch-workloadpolicy-selector
// (a CRD rule over the selector's unbounded lists is beyond the CRD's cost budget); its names by the
// CEL rules below.
type WorkloadPolicySpec struct {
	// NamespaceSelector picks the namespaces this policy governs. Empty selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Weight orders policies that govern the same namespace: the highest weight wins, ties by name.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// Defaults are filled into workloads that leave these fields empty; a user's value is never replaced.
	// +optional
	Defaults PolicyDefaults `json:"defaults,omitempty"`

	// AllowedQueues, when set, are the only queues workloads in governed namespaces may use.
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=263
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(q, q.matches('^(namespace/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'))",message="a Volcano queue name has lowercase letters, digits, '-' and '.', starts and ends with a letter or digit and has no spaces, such as 'team-a', optionally after 'namespace/' for a NamespaceQueue: remove the spaces or correct the name"
	// +optional
	AllowedQueues []string `json:"allowedQueues,omitempty"`

	// AllowedClusters, when set, are the only Karmada member clusters workloads in governed
	// namespaces may be propagated to: every PropagationPolicy must name its clusters
	// (placement.clusterAffinity.clusterNames, and each clusterAffinities term's) among them, and so
	// must every HyperJob replicatedJob (its clusterNames, or the policy's default
	// propagation.clusterNames when it names none).
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +optional
	AllowedClusters []string `json:"allowedClusters,omitempty"`
}

// WorkloadPolicyStatus is kept by hyperbatch's policy controller.
type WorkloadPolicyStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchingNamespaces counts the namespaces the selector matches now.
	// +optional
	MatchingNamespaces int32 `json:"matchingNamespaces,omitempty"`

	// Conditions: Ready says whether the policy is valid and in force.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// WorkloadPolicy defaults and restricts the batch workloads of the namespaces it selects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wlp,categories=hyperbatch
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.defaults.queue`
// +kubebuilder:printcolumn:name="Priority",type=string,JSONPath=`.spec.defaults.priorityClassName`
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.matchingNamespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkloadPolicySpec   `json:"spec,omitempty"`
	Status WorkloadPolicyStatus `json:"status,omitempty"`
}

// WorkloadPolicyList is a list of WorkloadPolicy.
//
// +kubebuilder:object:root=true
type WorkloadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WorkloadPolicy{}, &WorkloadPolicyList{})
}
