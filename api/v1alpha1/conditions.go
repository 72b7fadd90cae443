package v1alpha1

// WorkloadPolicy status conditions and reasons that users and hyperbatch's components read.
const (
	// PolicyConditionReady says whether the policy is valid and in force.
	PolicyConditionReady = "Ready"
	// PolicyReasonPriorityClassNotFound (Ready=False): spec.defaults.priorityClassName names no
	// PriorityClass. The policy still governs its namespaces and fills its other defaults, but no
	// workload gets that priorityClassName (every Pod would be refused with it) until the
	// PriorityClass exists; the defaulting engine reads this condition.
	PolicyReasonPriorityClassNotFound = "PriorityClassNotFound"

	// PolicyConditionWeightTie is True while another policy of the same spec.weight wins some of the
	// namespaces this policy selects (ties go to the smaller name); its message names the winner.
	PolicyConditionWeightTie = "WeightTie"
)
