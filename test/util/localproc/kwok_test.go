package localproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kwok's own fast pod stages, read from the pinned module, with pod-complete leaving held pods out.
func TestWriteKwokConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	require.NoError(t, WriteKwokConfig(repoRoot(t), path))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	docs := strings.Split(string(raw), "\n---\n")
	require.Len(t, docs, 4, "KwokConfiguration and three pod stages")
	assert.Contains(t, docs[0], "kind: KwokConfiguration")
	for i, name := range []string{"pod-ready", "pod-complete", "pod-delete"} {
		assert.Contains(t, docs[i+1], "name: "+name)
	}
	assert.Contains(t, docs[2], `.metadata.annotations["hyperbatch.dev/kwok-hold"]`)
	assert.Contains(t, docs[2], "DoesNotExist")
	assert.NotContains(t, docs[1], "kwok-hold", "only pod-complete is narrowed")
}
