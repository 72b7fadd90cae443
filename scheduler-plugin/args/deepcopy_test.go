package args

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The generated DeepCopy copies every field and shares no memory with the original.
func TestDeepCopy(t *testing.T) {
	in := &HyperTopologyArgs{
		TypeMeta:             metav1.TypeMeta{APIVersion: "kubescheduler.config.k8s.io/v1", Kind: Kind},
		PermitTimeoutSeconds: ptr.To[int32](30),
		MaxCandidatesPerTier: ptr.To[int32](8),
		ScoreWeights:         &ScoreWeights{Locality: ptr.To[int32](3), LeafFill: ptr.To[int32](4)},
	}
	out, ok := in.DeepCopyObject().(*HyperTopologyArgs)
	require.True(t, ok, "DeepCopyObject returns %T", in.DeepCopyObject())
	assert.Equal(t, in, out)

	*out.PermitTimeoutSeconds, *out.MaxCandidatesPerTier = 1, 2
	*out.ScoreWeights.Locality, *out.ScoreWeights.LeafFill = 5, 6
	out.Kind = "changed"
	assert.Equal(t, int32(30), *in.PermitTimeoutSeconds)
	assert.Equal(t, int32(8), *in.MaxCandidatesPerTier)
	assert.Equal(t, int32(3), *in.ScoreWeights.Locality)
	assert.Equal(t, int32(4), *in.ScoreWeights.LeafFill)
	assert.Equal(t, Kind, in.Kind)

	assert.Nil(t, (*HyperTopologyArgs)(nil).DeepCopy())
	assert.Equal(t, &HyperTopologyArgs{}, (&HyperTopologyArgs{}).DeepCopy())
}
