package builders

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTeamA(t *testing.T) {
	p := TeamA().Obj()
	assert.Equal(t, "team-a", p.Name)
	assert.Equal(t, int32(10), p.Spec.Weight)
	assert.Equal(t, map[string]string{"team": "a"}, p.Spec.NamespaceSelector.MatchLabels)
	d := p.Spec.Defaults
	assert.Equal(t, []string{"team-a", "batch-normal", "hyperbatch-scheduler"}, []string{d.Queue, d.PriorityClassName, d.SchedulerName})
	require.NotNil(t, d.NetworkTopology)
	assert.Equal(t, int32(2), *d.NetworkTopology.HighestTierAllowed)
	assert.Equal(t, int32(86400), *d.TTLSecondsAfterFinished)
	assert.Equal(t, int64(604800), *d.ActiveDeadlineSeconds)
	assert.Equal(t, []string{"a", "b"}, d.Propagation.ClusterNames)
	assert.Equal(t, []string{"team-a", "shared"}, p.Spec.AllowedQueues)
	// Each call builds a fresh object.
	TeamA().Obj().Spec.AllowedQueues[0] = "changed"
	assert.Equal(t, "team-a", TeamA().Obj().Spec.AllowedQueues[0])
}

func TestHyperJob(t *testing.T) {
	hj := MakeHyperJob("ns", "llm").ReplicatedJobs(
		MakeReplicatedJob("w", 2).Clusters("c1").Template(PodTemplate("img", 4)).Obj(),
		MakeReplicatedJob("ps", 1).Obj()).Obj()
	require.Len(t, hj.Spec.ReplicatedJobs, 2)
	w := hj.Spec.ReplicatedJobs[0]
	assert.Equal(t, []string{"c1"}, w.ClusterNames)
	assert.Equal(t, int32(2), w.Replicas)
	gpus := w.TemplateSpec.Tasks[0].Template.Spec.Containers[0].Resources.Limits[GPU]
	assert.True(t, gpus.Equal(resource.MustParse("4")))
	assert.Equal(t, "busybox:1", hj.Spec.ReplicatedJobs[1].TemplateSpec.Tasks[0].Template.Spec.Containers[0].Image)
	assert.Equal(t, corev1.PreemptLowerPriority, *PriorityClass("p", 1).PreemptionPolicy)
}
