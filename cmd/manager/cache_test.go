package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cached pods lose their managedFields (they are kept for every other kind: no DefaultTransform),
// and the ConfigMap selector stays.
func TestCacheOptionsStripPodManagedFields(t *testing.T) {
	opts := cacheOptions()
	assert.Nil(t, opts.DefaultTransform, "the HyperJob controller reads a cached PropagationPolicy's managedFields")
	var pods, configMaps int
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *corev1.Pod:
			pods++
			require.NotNil(t, by.Transform, "pods are cached without a transform")
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}}}
			out, err := by.Transform(pod)
			require.NoError(t, err)
			got := out.(*corev1.Pod)
			assert.Empty(t, got.ManagedFields)
			assert.Equal(t, "b", got.Labels["a"])
		case *corev1.ConfigMap:
			configMaps++
			assert.NotNil(t, by.Label)
		}
	}
	assert.Equal(t, 1, pods)
	assert.Equal(t, 1, configMaps)
}
