package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
)

// Volcano's own example configuration (its user guide's ConfigMap value) parses unchanged.
func TestVolcanoExampleParses(t *testing.T) {
	f, err := config.Parse([]byte(`
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
    credentials:
      secretRef:
        name: ufm-credentials
        namespace: volcano-system
    config:
      endpoint: https://ufm-server:8080
      insecureSkipVerify: true
  - source: roce
    enabled: false
    interval: 15m
    config:
      endpoint: https://roce-server:9090
      token: token
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA2:
          - nodeLabel: "volcano.sh/tor"
          - nodeLabel: "kubernetes.io/hostname"
`))
	require.NoError(t, err)
	en := f.Enabled()
	require.Len(t, en, 2)
	assert.Equal(t, "ufm", en[0].Source)
	assert.Equal(t, 10*time.Minute, en[0].Period())
	assert.Equal(t, "ufm-credentials", en[0].Credentials.SecretRef.Name)
	assert.Equal(t, true, en[0].Config["insecureSkipVerify"])
	assert.Equal(t, "label", en[1].Source)
	assert.Equal(t, config.DefaultInterval, en[1].Period(), "no interval means Volcano's default, 1h")
}

func TestParseErrorsNameTheField(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"typo":           {"networkTopologyDiscovery: [{source: label, enabeld: true}]", `unknown field "enabeld"`},
		"no source":      {"networkTopologyDiscovery: [{enabled: true}]", "networkTopologyDiscovery[0].source is empty"},
		"duplicate":      {"networkTopologyDiscovery: [{source: label}, {source: label}]", "networkTopologyDiscovery[1].source \"label\" repeats"},
		"bad interval":   {"networkTopologyDiscovery: [{source: label, interval: soon}]", `"soon" is not a duration`},
		"short interval": {"networkTopologyDiscovery: [{source: label, interval: 1ms}]", "networkTopologyDiscovery[0].interval 1ms is too short"},
		"half secretRef": {"networkTopologyDiscovery: [{source: ufm, credentials: {secretRef: {name: x}}}]", "secretRef needs both name and namespace"},
		"not yaml":       {"networkTopologyDiscovery: [", "not valid YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse([]byte(c.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestDecodeStrict(t *testing.T) {
	var out struct {
		A int `json:"a"`
	}
	require.NoError(t, config.DecodeStrict(map[string]any{"a": 1}, &out))
	assert.Equal(t, 1, out.A)
	assert.ErrorContains(t, config.DecodeStrict(map[string]any{"b": 1}, &out), `unknown field "b"`)
	assert.ErrorContains(t, config.DecodeStrict(map[string]any{"a": "x"}, &out), "field a")
}
