package webhook

import (
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// configuredPaths are the paths the webhook configurations built for kinds send requests to.
func configuredPaths(t *testing.T, kinds []Kind) []string {
	t.Helper()
	mwc, vwc := Configurations(ConfigOptions{URL: "https://127.0.0.1:9443", Kinds: kinds})
	var out []string
	add := func(raw *string) {
		require.NotNil(t, raw)
		u, err := url.Parse(*raw)
		require.NoError(t, err)
		if !slices.Contains(out, u.Path) {
			out = append(out, u.Path)
		}
	}
	for _, w := range mwc.Webhooks {
		add(w.ClientConfig.URL)
	}
	for _, w := range vwc.Webhooks {
		add(w.ClientConfig.URL)
	}
	slices.Sort(out)
	return out
}

// The handlers served for a selection of kinds and the configurations registered for the same
// selection name the same paths, each the kind table's: the apiserver never calls a path that is not
// served, and nothing is served that no configuration calls. The Karmada control plane's selection
// serves only its three kinds.
func TestKindSelectionServesWhatIsConfigured(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	for name, kinds := range map[string][]Kind{
		"all":     AllKinds(),
		"karmada": {KindHyperJob, KindVolcanoJob, KindPropagationPolicy},
		"jobset":  {KindJobSet},
		"policy":  {KindWorkloadPolicy},
	} {
		t.Run(name, func(t *testing.T) {
			var served []string
			for p := range d.handlers(kinds) {
				served = append(served, p)
			}
			slices.Sort(served)
			assert.Equal(t, configuredPaths(t, kinds), served)
			var want []string
			for _, k := range kinds {
				spec, ok := defaults.LookupKind(k)
				require.True(t, ok)
				for _, p := range []string{spec.MutatePath, spec.ValidatePath} {
					if p != "" {
						want = append(want, p)
					}
				}
				if k == KindJobSet {
					want = append(want, ValidateJobSetPodPath)
				}
			}
			slices.Sort(want)
			assert.Equal(t, want, served)
		})
	}
	karmada := configuredPaths(t, []Kind{KindHyperJob, KindVolcanoJob, KindPropagationPolicy})
	assert.NotContains(t, karmada, MutatePodPath)
	assert.NotContains(t, karmada, ValidatePodGroupPath)
}

// Every kind of the table has its handlers; the UPDATE rule of each mutating handler is its row's.
func TestEveryKindHasHandlers(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	for _, spec := range defaults.Kinds() {
		build, ok := kindHandlers[spec.Kind]
		require.Truef(t, ok, "kind %s of the table has no handlers in webhook.kindHandlers", spec.Kind)
		m, v := build(d)
		assert.NotNil(t, v, spec.Kind)
		assert.Equal(t, spec.MutatePath != "", m != nil, spec.Kind)
	}
	assert.Equal(t, defaults.CarryOverDropped, d.podMutator().carry)
	assert.Equal(t, len(defaults.Kinds()), len(kindHandlers))
}
