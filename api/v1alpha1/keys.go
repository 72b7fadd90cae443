package v1alpha1

// Labels and annotations hyperbatch owns: users type them in manifests, select by them, or read them
// (docs/design.md, "Keys"). Each constant is named for what it is, a label or an annotation.
// Upstream keys (Volcano's queue and PodGroup annotations, its topology annotations) stay upstream's
// constants; internal/defaults names them for the engine.
const (
	// PodWebhookLabel on a Namespace, with the value PodWebhookLabelEnabled, opts its Pods in to
	// the Pod webhooks (the webhook configurations' default namespaceSelector). The namespacelabel
	// controller keeps it on every namespace a WorkloadPolicy governs.
	PodWebhookLabel = "hyperbatch.dev/pod-webhook"
	// PodWebhookLabelEnabled is the value of PodWebhookLabel that opts a namespace in.
	PodWebhookLabelEnabled = "enabled"
	// PodWebhookLabelDisabled is the value of PodWebhookLabel the namespacelabel controller writes
	// on a namespace no WorkloadPolicy governs. The workload webhooks (Volcano Job, PodGroup,
	// JobSet, HyperJob, PropagationPolicy) skip such namespaces, so a hyperbatch outage never blocks
	// workloads that no policy governs, but for two narrow entries whose work needs no policy (a
	// JobSet that is a gang on its own; a Volcano Job's PodGroup whose topology lost its tier name);
	// a namespace without the label (new, or not reconciled yet) still reaches them.
	PodWebhookLabelDisabled = "disabled"
	// PodWebhookManagedAnnotation ("true") on a Namespace marks a PodWebhookLabel the
	// namespacelabel controller set, and may therefore remove; a label set by hand is never removed.
	PodWebhookManagedAnnotation = "hyperbatch.dev/pod-webhook-managed"

	// TTLSecondsAfterFinishedAnnotation carries the TTL on kinds without a native field (HyperJob).
	TTLSecondsAfterFinishedAnnotation = "hyperbatch.dev/ttl-seconds-after-finished"
	// ActiveDeadlineSecondsAnnotation carries the deadline on HyperJobs, JobSets and Volcano Jobs.
	ActiveDeadlineSecondsAnnotation = "hyperbatch.dev/active-deadline-seconds"
	// DefaultedByAnnotation says which source filled which fields:
	// "<source>/<field>,<field>;<source>/<field>" (format in internal/defaults' package doc).
	DefaultedByAnnotation = "hyperbatch.dev/defaulted-by"
	// PricedMinResourcesAnnotation on a Kubeflow Trainer PodGroup is the minResources the podgroup
	// controller priced from the TrainJob's JobSet (LimitRange defaults and RuntimeClass overhead
	// counted), "cpu=800m,memory=128Mi"; the PodGroup webhook keeps spec.minResources at it when
	// Trainer re-applies its own sum (docs/podgroup.md).
	PricedMinResourcesAnnotation = "hyperbatch.dev/priced-min-resources"

	// HyperNodeSourceLabel marks a HyperNode as written by the discovery source named in its value
	// (controllers/hypernode). The key is Volcano's, which volcano.sh/apis does not export; it is
	// here so that kubectl-hyperbatch reads it without importing the discovery controller.
	HyperNodeSourceLabel = "volcano.sh/network-topology-source"

	// GangAnnotation ("false") on a JobSet opts it out of the PodGroup the podgroup controller
	// would give it; any other value is ignored.
	GangAnnotation = "hyperbatch.dev/gang"
	// GangAnnotationOptOut is the value of GangAnnotation that opts a JobSet out.
	GangAnnotationOptOut = "false"
	// JobSetGangLabel (value: the JobSet's name) marks the pod templates of a gang JobSet, whose
	// pods name the JobSet's PodGroup. The PodGroup gate's objectSelector selects it, so the pods of
	// other JobSets make no call to the gate.
	JobSetGangLabel = "hyperbatch.dev/jobset-gang"

	// SubGroupByAnnotation on a JobSet splits its gang into sub-groups (PodGroup.spec.subGroupPolicy,
	// written by controllers/podgroup): "replica" makes each Job of a replicatedJob one sub-group;
	// "pods" makes each SubGroupPodsAnnotation pods of a replicatedJob, in completion-index order,
	// one sub-group (docs/scheduler.md, "Sub-groups").
	SubGroupByAnnotation = "hyperbatch.dev/subgroup-by"
	// SubGroupByReplica and SubGroupByPods are the values of SubGroupByAnnotation.
	SubGroupByReplica = "replica"
	SubGroupByPods    = "pods"
	// SubGroupPodsAnnotation is the size of each sub-group with SubGroupByAnnotation "pods".
	SubGroupPodsAnnotation = "hyperbatch.dev/subgroup-pods"
	// SubGroupNetworkTopologyModeAnnotation ("hard" or "soft") and SubGroupHighestTierAnnotation
	// (a positive tier) are each sub-group's networkTopology, as Volcano's
	// volcano.sh/network-topology-mode and volcano.sh/network-topology-highest-tier are the gang's.
	SubGroupNetworkTopologyModeAnnotation = "hyperbatch.dev/subgroup-network-topology-mode"
	SubGroupHighestTierAnnotation         = "hyperbatch.dev/subgroup-highest-tier"

	// HyperJobNameLabel names the HyperJob that owns a child Volcano Job or PropagationPolicy.
	HyperJobNameLabel = "volcano.sh/hyperjob-name"
	// ReplicatedJobNameLabel names the replicatedJob a child object was made from.
	ReplicatedJobNameLabel = "volcano.sh/replicatedjob-name"
	// VCJobTemplateSpecHashLabel is the (truncated) SHA-256 of a child Volcano Job's template spec.
	VCJobTemplateSpecHashLabel = "volcano.sh/vcjob-template-spec-hash"
	// PPSpecHashLabel is the (truncated) SHA-256 of a child PropagationPolicy's spec.
	PPSpecHashLabel = "volcano.sh/pp-spec-hash"
	// HyperJobChildFinalizer is on every child Volcano Job of a HyperJob. The HyperJob controller
	// removes it from a deleted child only once the HyperJob's status holds the child's final state,
	// so a finished child can never vanish unrecorded and run again.
	HyperJobChildFinalizer = "hyperbatch.dev/hyperjob-child"
	// FinishedChildPodsAnnotation on a HyperJob holds the final pod counts of its finished children
	// (JSON: replicatedJob → child index → [succeeded, failed]), written by the HyperJob controller
	// when it first sees a child finished, before the status records it. The status sums use these
	// numbers, not what the child reports later (Volcano lowers a finished job's counts as its pods
	// go, and a deleted child reports nothing).
	FinishedChildPodsAnnotation = "hyperbatch.dev/finished-child-pods"
	// AutoSplitAnnotation on a HyperJob in splitPolicy mode auto holds the decided split (JSON:
	// accelerator type and, per child, its member cluster, the HyperNode it was counted in and its
	// pods × accelerators, and the members left out with why), written once by the HyperJob
	// controller before any child exists; taken back and decided again only once, when Karmada
	// refuses a member of it for a reason that does not pass by itself (docs/multicluster.md, "When
	// a decision changes").
	AutoSplitAnnotation = "hyperbatch.dev/auto-split"
)
