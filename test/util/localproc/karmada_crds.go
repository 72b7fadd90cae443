package localproc

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// KarmadaModule is the module the plane's binaries and CRDs come from.
const KarmadaModule = "github.com/karmada-io/karmada"

// toolsGoMod pins the Karmada binaries (hack/tools.sh karmada-*) below the repository root.
func toolsGoMod(root string) string {
	return filepath.Join(root, "hack", "tools", "karmada", "go.mod")
}

// KarmadaVersion is the Karmada version hack/tools/karmada/go.mod (below the repository root) pins,
// the one whose binaries hack/tools.sh builds; the CRDs are read from the same version.
func KarmadaVersion(root string) (string, error) {
	raw, err := os.ReadFile(toolsGoMod(root))
	if err != nil {
		return "", fmt.Errorf("reading the Karmada tool pins: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == KarmadaModule {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s: restore the karmada tool group (go get -tool %s/cmd/...)", toolsGoMod(root), KarmadaModule, KarmadaModule)
}

// KarmadaModuleDir is the pinned Karmada module's directory in the Go module cache (downloaded when
// missing).
func KarmadaModuleDir(root string) (string, error) {
	version, err := KarmadaVersion(root)
	if err != nil {
		return "", err
	}
	return moduleDir(filepath.Dir(toolsGoMod(root)), KarmadaModule, version)
}

// moduleDir is module@version's directory in the Go module cache, downloaded from dir (a tool
// module that requires it) when missing.
func moduleDir(dir, module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s (check GOPROXY): %w", module, version, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gave no directory (%s)", module, version, out)
	}
	return m.Dir, nil
}

// crdBases is where Karmada keeps its CRDs (the kustomization Karmada's installers apply).
const crdBases = "charts/karmada/_crds/bases"

// bindingConversionCRDs get a conversion webhook in Karmada's kustomization
// (charts/karmada/_crds/patches): their v1alpha1 is served and converted by karmada-webhook's /convert.
var bindingConversionCRDs = map[string]bool{
	"resourcebindings.work.karmada.io":        true,
	"clusterresourcebindings.work.karmada.io": true,
}

// karmadaCRDs reads every CRD of Karmada's charts/karmada/_crds/bases and points the bindings'
// conversion webhook at webhookURL (…/convert) with caBundle.
func karmadaCRDs(moduleDir, webhookURL string, caBundle []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(moduleDir, crdBases, "*", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD in %s: the pinned Karmada version moved its CRDs", filepath.Join(moduleDir, crdBases))
	}
	sort.Strings(files)
	var out []*apiextensionsv1.CustomResourceDefinition
	patched := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		if bindingConversionCRDs[crd.Name] {
			url := webhookURL + "/convert"
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
					ConversionReviewVersions: []string{"v1"},
				},
			}
			patched++
		}
		out = append(out, crd)
	}
	if patched != len(bindingConversionCRDs) {
		return nil, fmt.Errorf("found %d of the %d binding CRDs in %s", patched, len(bindingConversionCRDs), filepath.Join(moduleDir, crdBases))
	}
	return out, nil
}

// installKarmadaCRDs creates crds and the CRDs of extraDirs and waits until all are served.
func installKarmadaCRDs(cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, extraDirs []string) error {
	for _, d := range extraDirs {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("CRD directory %s is missing: run 'make crds' (upstream CRDs) or 'make generate' (ours): %w", d, err)
		}
	}
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		CRDs: crds, Paths: extraDirs, ErrorIfPathMissing: true, MaxTime: 90 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("installing the CRDs (Karmada's and %v): %w", extraDirs, err)
	}
	return nil
}
