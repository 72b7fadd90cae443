package policyinputs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
)

func trainerObj(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(defaults.TrainJobGVK.GroupVersion().WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// The runtime a TrainJob names decides who makes its PodGroup: Trainer, with
// spec.podGroupPolicy.volcano; otherwise nobody but hyperbatch (a coscheduling policy, no policy, or a
// runtime that does not exist).
func TestTrainingRuntime(t *testing.T) {
	volcano := trainerObj("ClusterTrainingRuntime", "", "torch-volcano", map[string]any{
		"podGroupPolicy": map[string]any{"volcano": map[string]any{}}})
	cosched := trainerObj("TrainingRuntime", "ml", "torch-cosched", map[string]any{
		"podGroupPolicy": map[string]any{"coscheduling": map[string]any{"scheduleTimeoutSeconds": int64(60)}}})
	plain := trainerObj("ClusterTrainingRuntime", "", "torch", map[string]any{})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(volcano, cosched, plain).Build()
	for _, tc := range []struct {
		name     string
		ref      map[string]any
		found    bool
		trainers bool
	}{
		{"cluster runtime with volcano (kind unset)", map[string]any{"name": "torch-volcano"}, true, true},
		{"namespaced runtime with coscheduling", map[string]any{"name": "torch-cosched", "kind": "TrainingRuntime"}, true, false},
		{"runtime without podGroupPolicy", map[string]any{"name": "torch", "kind": "ClusterTrainingRuntime"}, true, false},
		{"missing runtime", map[string]any{"name": "gone"}, false, false},
		{"no runtimeRef", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := map[string]any{}
			if tc.ref != nil {
				spec["runtimeRef"] = tc.ref
			}
			rt, err := TrainingRuntime(context.Background(), c, trainerObj("TrainJob", "ml", "job", spec))
			require.NoError(t, err)
			assert.Equal(t, tc.found, rt != nil)
			assert.Equal(t, tc.trainers, TrainerMakesPodGroup(rt))
		})
	}
}
