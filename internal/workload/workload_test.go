package workload_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// The registry and the defaults engine's kind table list the same kinds, in the same order.
func TestRegistryFollowsTheKindTable(t *testing.T) {
	var kinds []defaults.Kind
	for _, w := range workload.All() {
		kinds = append(kinds, w.Kind)
	}
	assert.Equal(t, defaults.KindNames(), kinds)
}

// Every row says what its consumers need, and nothing contradicts itself.
func TestRowsAreComplete(t *testing.T) {
	owners := map[string]defaults.Kind{}
	names := map[string]defaults.Kind{}
	for _, w := range workload.All() {
		assert.NotEmpty(t, w.Title, w.Kind)
		if w.Admission.PolicyCovered() {
			assert.Empty(t, w.Admission.Uncovered, "%s: covered by the admission policies and uncovered", w.Kind)
		} else {
			assert.NotEmpty(t, w.Admission.Uncovered, "%s: keeps its webhook in policy mode without a reason", w.Kind)
		}
		if g := w.Gang; g != nil {
			assert.NotEmpty(t, g.MadeBy, w.Kind)
			assert.NotEmpty(t, g.OwnerAPIVersion, w.Kind)
			assert.NotEmpty(t, g.OwnerKind, w.Kind)
			assert.NotEmpty(t, g.MinMember, w.Kind)
			key := g.OwnerAPIVersion + "/" + g.OwnerKind
			assert.NotContains(t, owners, key, "%s and %s claim the PodGroups of the same owner", owners[key], w.Kind)
			owners[key] = w.Kind
			got, ok := workload.ByPodGroupOwner(g.OwnerAPIVersion, g.OwnerKind)
			assert.True(t, ok && got.Kind == w.Kind, w.Kind)
			if g.SubGroupAnnotations {
				assert.NotEmpty(t, g.SubGroups, "%s: asks for sub-groups by annotation, but the row does not say how", w.Kind)
			}
			if g.Via != "" {
				via, ok := workload.Lookup(g.Via)
				assert.True(t, ok && via.Gang != nil, "%s: its gang is via %s, which is no gang kind", w.Kind, g.Via)
			}
		}
		if l := w.Lifecycle; l != nil {
			assert.Contains(t, []workload.Where{workload.InAnnotation, workload.InNativeField}, l.Deadline, w.Kind)
			assert.Contains(t, []workload.Where{workload.InAnnotation, workload.InNativeField}, l.TTL, w.Kind)
			assert.NotNil(t, l.Started, w.Kind)
			assert.NotNil(t, l.FinishedAt, w.Kind)
			assert.NotNil(t, l.Suspended, w.Kind)
			assert.Equal(t, l.TTL == workload.InNativeField, l.NativeTTL != nil, "%s: NativeTTL is set exactly when the TTL is native", w.Kind)
			if l.Deadline == workload.InAnnotation {
				assert.NotEmpty(t, l.End, "%s: the lifecycle controller enforces its deadline, but the row says not how", w.Kind)
			}
		}
		if w.CLI.Why || w.CLI.Explain {
			require.NotEmpty(t, w.CLI.Name, w.Kind)
			assert.Contains(t, w.Names(), w.CLI.Name, w.Kind)
		}
		for _, n := range w.Names() {
			assert.NotContains(t, names, n, "%q names both %s and %s", n, names[n], w.Kind)
			names[n] = w.Kind
			got, ok := workload.ByName(n)
			assert.True(t, ok && got.Kind == w.Kind, "%q", n)
		}
	}
}

func TestNames(t *testing.T) {
	w, ok := workload.ByName("VolcanoJob")
	require.True(t, ok)
	assert.Equal(t, defaults.KindVolcanoJob, w.Kind)
	for _, n := range []string{"vcjob", "vj", "jobs.batch.volcano.sh", "job.batch.volcano.sh", "volcanojob"} {
		assert.Contains(t, w.Names(), n)
	}
	assert.False(t, slices.Contains(w.Names(), "jobs"), "jobs would name a Kubernetes Job")
	_, ok = workload.ByName("job")
	assert.False(t, ok)
	w, ok = workload.ByName("po")
	assert.True(t, ok && w.Kind == defaults.KindPod)
}

func TestViews(t *testing.T) {
	var withLifecycle []defaults.Kind
	for _, w := range workload.WithLifecycle() {
		withLifecycle = append(withLifecycle, w.Kind)
	}
	assert.Equal(t, []defaults.Kind{defaults.KindVolcanoJob, defaults.KindJobSet, defaults.KindHyperJob, defaults.KindTrainJob}, withLifecycle)
	gangs := workload.Gangs(workload.MadeByHyperbatch)
	require.Len(t, gangs, 1)
	assert.Equal(t, defaults.KindJobSet, gangs[0].Kind)
}
