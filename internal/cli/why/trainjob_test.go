package why_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
)

// trainjob/NAME resolves Trainer's PodGroup (controlled by the TrainJob) and, without one, the gang of
// the TrainJob's JobSet (Trainer names it after the TrainJob); the report is the same as for that
// PodGroup's own name.
func TestResolveTrainJob(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	require.NotEmpty(t, s.PodGroups)
	base := s.PodGroups[0]

	own := *base.DeepCopy()
	own.Namespace, own.Name = "default", "llm"
	own.OwnerReferences = []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llm", UID: "u1", Controller: ptr.To(true)}}
	viaJobSet := *base.DeepCopy()
	viaJobSet.Namespace, viaJobSet.Name = "default", "ft"
	viaJobSet.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "ft", UID: "u2", Controller: ptr.To(true)}}
	s.PodGroups = append(s.PodGroups, own, viaJobSet)

	pg, owner, err := why.Resolve(s, "default", "trainjob/llm")
	require.NoError(t, err)
	assert.Equal(t, "llm", pg.Name)
	assert.Equal(t, "TrainJob default/llm", owner)

	pg, owner, err = why.Resolve(s, "default", "tj/ft")
	require.NoError(t, err)
	assert.Equal(t, "ft", pg.Name)
	assert.Equal(t, "TrainJob default/ft (as its JobSet default/ft)", owner)
	byJobSet, _, err := why.Resolve(s, "default", "jobset/ft")
	require.NoError(t, err)
	assert.Equal(t, why.Build(s, byJobSet, "", now(t)), why.Build(s, pg, "", now(t)), "the same numbers as for the JobSet gang")
}
