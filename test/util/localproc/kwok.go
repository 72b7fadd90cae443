package localproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// KwokHoldAnnotation keeps a Running pod Running: kwok completes pods owned by a Job (Volcano's
// too) at once, and a pod with this annotation is left out of that stage (a workload that must
// stay Running for a while, such as a stability test's).
const KwokHoldAnnotation = "hyperbatch.dev/kwok-hold"

// kwokModule is the module kwok is built from; hack/tools/kwok/go.mod pins it.
const kwokModule = "sigs.k8s.io/kwok"

// kwokPodStages are kwok's own fast pod stages (kustomize/stage/pod/fast, what kwok uses when given
// no pod stage).
var kwokPodStages = []string{"pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"}

// WriteKwokConfig writes kwok's configuration to path: no options, and kwok's fast pod stages read
// from the pinned kwok module (below root's hack/tools/kwok), pod-complete limited to pods without
// KwokHoldAnnotation. Node stages stay kwok's defaults.
func WriteKwokConfig(root, path string) error {
	goMod := filepath.Join(root, "hack", "tools", "kwok", "go.mod")
	raw, err := os.ReadFile(goMod)
	if err != nil {
		return fmt.Errorf("reading the kwok tool pins: %w", err)
	}
	var version string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == kwokModule {
			version = f[1]
		}
	}
	if version == "" {
		return fmt.Errorf("%s does not require %s", goMod, kwokModule)
	}
	dir, err := moduleDir(filepath.Dir(goMod), kwokModule, version)
	if err != nil {
		return err
	}
	docs := [][]byte{[]byte("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n")}
	for _, f := range kwokPodStages {
		src := filepath.Join(dir, "kustomize", "stage", "pod", "fast", f)
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("reading kwok's stage %s: %w", src, err)
		}
		if f == "pod-complete.yaml" {
			if b, err = withoutHeld(b); err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
		}
		docs = append(docs, b)
	}
	if err := os.WriteFile(path, bytes.Join(docs, []byte("\n---\n")), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// withoutHeld adds "KwokHoldAnnotation does not exist" to a Stage's selector.
func withoutHeld(stage []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(stage, &m); err != nil {
		return nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	exprs, _ := sel["matchExpressions"].([]any)
	if spec == nil || sel == nil || exprs == nil {
		return nil, fmt.Errorf("stage %v has no spec.selector.matchExpressions", m["metadata"])
	}
	sel["matchExpressions"] = append(exprs, map[string]any{
		"key": `.metadata.annotations["` + KwokHoldAnnotation + `"]`, "operator": "DoesNotExist"})
	return yaml.Marshal(m)
}
