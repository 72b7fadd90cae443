package workload

import "github.com/hyperbatch/hyperbatch/internal/defaults"

// podGroup: a Volcano PodGroup is admitted (the PodGroup webhook fills what its Volcano Job or
// policy says); `why NAME` names the PodGroup itself.
var podGroup = Workload{
	Kind:      defaults.KindPodGroup,
	Title:     "PodGroup",
	Admission: Admission{Uncovered: "a PodGroup of a Volcano Job follows the Job, which the webhook reads from the cluster at admission: CEL cannot read another object"},
	CLI:       CLI{Name: "pg", Aliases: []string{"pg", "podgroup-v1beta1"}, Why: true, Explain: true},
}
