package ibnetdiscover_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ibnetdiscover"
)

func render(t *testing.T, p *ibnetdiscover.Provider) string {
	t.Helper()
	groups, err := p.Discover()
	require.NoError(t, err)
	hns, err := hypernode.Build(ibnetdiscover.Source, groups, nil)
	require.NoError(t, err)
	return hypernodetest.Render(hns)
}

// The file source is read on every round: a changed dump gives the new tree, an unreadable one an
// error naming the line (and nothing to write).
func TestFileSource(t *testing.T) {
	golden := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "ibnetdiscover", name+".txt"))
		require.NoError(t, err)
		return b
	}
	path := filepath.Join(t.TempDir(), "fabric.txt")
	require.NoError(t, os.WriteFile(path, golden("two-tier"), 0o600))
	p, err := ibnetdiscover.NewProvider(config.Source{Source: ibnetdiscover.Source, Enabled: true, Config: map[string]any{"file": path}},
		hypernode.Deps{Nodes: hypernodetest.NodeLister(hypernodetest.GoldenNodes()), Log: logr.Discard()})
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "expected", "two-tier.txt"))
	require.NoError(t, err)
	assert.Equal(t, string(want), render(t, p))

	require.NoError(t, os.WriteFile(path, golden("three-tier"), 0o600))
	want, err = os.ReadFile(filepath.Join(hypernodetest.FabricTestdata, "expected", "three-tier.txt"))
	require.NoError(t, err)
	assert.Equal(t, string(want), render(t, p))

	require.NoError(t, os.WriteFile(path, []byte("Switch 36 broken\n"), 0o600))
	_, err = p.Discover()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1")

	require.NoError(t, os.Remove(path))
	_, err = p.Discover()
	assert.ErrorContains(t, err, "reading config.file")
}

func TestConfigErrors(t *testing.T) {
	deps := hypernode.Deps{Nodes: hypernodetest.NodeLister(nil), Log: logr.Discard()}
	for name, c := range map[string]struct {
		cfg  map[string]any
		want string
	}{
		"neither":       {map[string]any{}, "set exactly one of file and configMap"},
		"both":          {map[string]any{"file": "/x", "configMap": map[string]any{"namespace": "a", "name": "b", "key": "c"}}, "exactly one"},
		"half cm":       {map[string]any{"configMap": map[string]any{"name": "b"}}, "config.configMap needs namespace, name and key"},
		"typo":          {map[string]any{"fiel": "/x"}, `unknown field "fiel"`},
		"bad poll":      {map[string]any{"file": "/x", "pollInterval": "often"}, `"often" is not a duration`},
		"negative poll": {map[string]any{"file": "/x", "pollInterval": "-1s"}, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ibnetdiscover.NewProvider(config.Source{Source: ibnetdiscover.Source, Config: c.cfg}, deps)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), c.want), err.Error())
		})
	}
}
