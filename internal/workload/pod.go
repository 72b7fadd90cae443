package workload

import "github.com/hyperbatch/hyperbatch/internal/defaults"

// pod: a Pod is admitted (webhook or policy mode) and is a gang member through its
// scheduling.k8s.io/group-name annotation; `why pod/NAME` follows that annotation.
var pod = Workload{
	Kind:  defaults.KindPod,
	Title: "Pod",
	Admission: Admission{PolicyFields: []string{defaults.FieldQueue, defaults.FieldPriorityClassName,
		defaults.FieldSchedulerName, defaults.FieldNetworkTopology}},
	CLI: CLI{Name: "pod", Aliases: []string{"po"}, Why: true, Explain: true},
}
