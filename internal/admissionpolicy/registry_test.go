package admissionpolicy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// Every kind the registry says the admission policies cover has its program, and no program
// serves a kind the registry leaves to its webhook.
func TestEveryCoveredKindHasAProgram(t *testing.T) {
	for _, w := range workload.All() {
		_, ok := programs[w.Kind]
		assert.Equal(t, w.Admission.PolicyCovered(), ok, "%s: covered %v, program %v", w.Kind, w.Admission.PolicyCovered(), ok)
		if !w.Admission.PolicyCovered() {
			assert.Equal(t, w.Admission.Uncovered, Uncovered[w.Kind])
		}
	}
	for k := range programs {
		_, ok := workload.Lookup(k)
		assert.True(t, ok, "a program for %s, which is not in the registry", k)
	}
}
