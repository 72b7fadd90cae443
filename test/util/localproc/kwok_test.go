package localproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kwok's own default stages (bin/kwok-stages.yaml, printed from the stages kwok embeds), with
// pod-complete leaving held pods out and every other stage as kwok ships it.
func TestWriteKwokConfig(t *testing.T) {
	bin := filepath.Join(repoRoot(t), "bin")
	if _, err := os.Stat(KwokStages(bin)); err != nil {
		t.Fatalf("%v: run `hack/tools.sh kwok` (make test-tools) first", err)
	}
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	require.NoError(t, WriteKwokConfig(bin, path))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	docs := strings.Split(string(raw), "\n---\n")
	assert.NotContains(t, string(raw), "kind: KwokConfiguration", "kwok v0.8.0 zeroes an explicit configuration's unset options")
	stages := map[string]string{}
	for _, d := range docs {
		for _, l := range strings.Split(d, "\n") {
			if n, ok := strings.CutPrefix(l, "  name: "); ok {
				stages[n] = d
				break
			}
		}
	}
	for _, name := range []string{"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-complete", "pod-delete"} {
		require.Contains(t, stages, name, "kwok's default stage %s", name)
	}
	assert.Contains(t, stages["pod-complete"], `.metadata.annotations["hyperbatch.dev/kwok-hold"]`)
	assert.Contains(t, stages["pod-complete"], "DoesNotExist")
	assert.NotContains(t, stages["pod-ready"], "kwok-hold", "only pod-complete is narrowed")
}
