package localproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binaries (hack/tools/karmada) and the API types the product compiles against (go.mod) must be
// the same Karmada version: the plane's CRDs are read from the tool pin.
func TestToolPinMatchesProduct(t *testing.T) {
	tool, err := KarmadaVersion(repoRoot(t))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	require.NoError(t, err)
	var product string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == KarmadaModule {
			product = f[1]
		}
	}
	assert.Equal(t, product, tool, "hack/tools/karmada/go.mod and go.mod pin the same %s", KarmadaModule)
}

// Every webhook path the plane registers is one karmada-webhook serves (its cmd/webhook/app in the
// pinned module), and the CRDs come with the binding conversion pointed at /convert.
func TestWebhooksAndCRDsMatchKarmada(t *testing.T) {
	dir, err := KarmadaModuleDir(repoRoot(t))
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(dir, "cmd", "webhook", "app", "webhook.go"))
	require.NoError(t, err)
	mwc, vwc := karmadaWebhookConfigurations("https://127.0.0.1:1", []byte("ca"))
	require.Len(t, mwc.Webhooks, len(karmadaMutatingWebhooks))
	require.Len(t, vwc.Webhooks, len(karmadaValidatingWebhooks))
	for _, w := range append(append([]karmadaWebhook{}, karmadaMutatingWebhooks...), karmadaValidatingWebhooks...) {
		assert.Contains(t, string(src), `hookServer.Register("`+w.path+`"`, "karmada-webhook serves %s (%s)", w.path, w.name)
	}
	assert.Contains(t, string(src), `hookServer.Register("/convert"`)

	crds, err := karmadaCRDs(dir, "https://127.0.0.1:1", []byte("ca"))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, c := range crds {
		names[c.Name] = true
		if bindingConversionCRDs[c.Name] {
			require.NotNil(t, c.Spec.Conversion.Webhook, c.Name)
			assert.Equal(t, "https://127.0.0.1:1/convert", *c.Spec.Conversion.Webhook.ClientConfig.URL, c.Name)
		}
	}
	for _, want := range []string{"propagationpolicies.policy.karmada.io", "resourcebindings.work.karmada.io", "works.work.karmada.io",
		"resourceinterpretercustomizations.config.karmada.io"} {
		assert.True(t, names[want], "Karmada's CRDs include %s", want)
	}
}

// repoRoot is the module's root: two directories above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	return root
}
