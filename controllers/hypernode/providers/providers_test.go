package providers_test

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers"
)

func TestBuiltin(t *testing.T) {
	reg := providers.Builtin()
	assert.Equal(t, []string{"ibnetdiscover", "label", "ufm"}, reg.Names())
	deps := hypernode.Deps{Nodes: hypernodetest.NodeLister(nil), Log: logr.Discard()}

	p, err := reg.New(config.Source{Source: "label", Enabled: true, Config: map[string]any{"presets": []any{"kubernetes-zones"}}}, deps)
	require.NoError(t, err)
	assert.Equal(t, "label", p.Name())

	_, err = reg.New(config.Source{Source: "roce", Enabled: true}, deps)
	assert.ErrorContains(t, err, `source "roce" has no provider; this build has ibnetdiscover, label, ufm`)

	_, err = reg.New(config.Source{Source: "label", Enabled: true, Config: map[string]any{"presets": []any{"x"}}}, deps)
	assert.ErrorContains(t, err, `source label: config.presets: unknown preset "x"`)
}
