package workload

import "github.com/hyperbatch/hyperbatch/internal/defaults"

// workloadPolicy: hyperbatch's own policy, validated only; it has no defaults to explain.
var workloadPolicy = Workload{
	Kind:      defaults.KindWorkloadPolicy,
	Title:     "WorkloadPolicy",
	Admission: Admission{Uncovered: "its checks parse label selectors and compare with every other policy (validation only)"},
}
