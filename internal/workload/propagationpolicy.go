package workload

import "github.com/hyperbatch/hyperbatch/internal/defaults"

// propagationPolicy: a Karmada PropagationPolicy is admitted on the Karmada control plane.
var propagationPolicy = Workload{
	Kind:      defaults.KindPropagationPolicy,
	Title:     "PropagationPolicy",
	Admission: Admission{Uncovered: "admitted by the Karmada control plane's apiserver, which runs hyperbatch's webhooks"},
	CLI:       CLI{Name: "pp", Aliases: []string{"pp"}, Explain: true},
}
