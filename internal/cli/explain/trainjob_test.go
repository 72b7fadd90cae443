package explain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/explain"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// explain trainjob/NAME: the fields the TrainJob's admission filled, with their source, and what the
// engine would fill today (the queue as a runtimePatches entry).
func TestExplainTrainJob(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	spec, err := explain.LookupKind("tj")
	require.NoError(t, err)
	require.Equal(t, defaults.KindTrainJob, spec.Kind)

	obj := spec.New()
	obj.SetNamespace("default")
	obj.SetName("llm")
	obj.SetAnnotations(map[string]string{hbv1.DefaultedByAnnotation: "team-a/ttlSecondsAfterFinished"})
	r := explain.Build(spec, obj, s)
	assert.Equal(t, "team-a", r.Policy)
	require.Len(t, r.Filled, 1)
	assert.Equal(t, explain.Filled{Field: "ttlSecondsAfterFinished", Source: "team-a", From: "WorkloadPolicy team-a"}, r.Filled[0])
	var fields []string
	for _, f := range r.WouldFill {
		fields = append(fields, f.Path)
	}
	assert.Contains(t, fields, "spec.runtimePatches", "the queue would go into hyperbatch's runtimePatches entry")
}
