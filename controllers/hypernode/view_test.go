package hypernode

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	topologylisters "volcano.sh/apis/pkg/client/listers/topology/v1alpha1"
)

// object is the HyperNode "a" as seen at resource version rv.
func object(source, rv string, uid types.UID) *topologyv1alpha1.HyperNode {
	hn := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv, UID: uid}}
	if source != "" {
		hn.Labels = map[string]string{SourceLabel: source}
	}
	return hn
}

// The view lays completed writes over the watch cache until the watch catches up, and never hides
// a HyperNode someone else created after one of our deletes.
func TestViewOverlay(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	v := &view{written: map[string]overlay{}, pending: map[string]int{}}
	v.lister = topologylisters.NewHyperNodeLister(idx)
	v.synced = func() bool { return true }

	// Our apply returned RV 5; the watch has not delivered it.
	v.wrote("a", object("label", "5", "u1"), "")
	got, ok := v.Get("a")
	require.True(t, ok)
	assert.Equal(t, "5", got.ResourceVersion)
	assert.Len(t, v.List("label"), 1)
	// An older event does not drop it; the event with its RV does.
	v.observed(object("label", "4", "u1"), false)
	assert.Contains(t, v.written, "a")
	require.NoError(t, idx.Add(object("label", "5", "u1")))
	v.observed(object("label", "5", "u1"), false)
	assert.NotContains(t, v.written, "a")
	assert.Len(t, v.List("label"), 1)

	// Our delete hides it until the watch reports the delete ...
	v.wrote("a", nil, "u1")
	_, ok = v.Get("a")
	assert.False(t, ok)
	assert.Empty(t, v.List("label"))
	// ... and a HyperNode created by someone else under that name afterwards is seen at once.
	require.NoError(t, idx.Update(object("", "9", "u2")))
	v.observed(object("", "9", "u2"), false)
	got, ok = v.Get("a")
	require.True(t, ok)
	assert.Equal(t, types.UID("u2"), got.UID)
	assert.Empty(t, v.List("label"), "not ours")
}
