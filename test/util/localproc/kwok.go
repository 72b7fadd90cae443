package localproc

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// KwokHoldAnnotation keeps a Running pod Running: kwok completes pods owned by a Job (Volcano's
// too) at once, and a pod with this annotation is left out of that stage (a workload that must
// stay Running for a while, such as a stability test's).
const KwokHoldAnnotation = "hyperbatch.dev/kwok-hold"

// WriteKwokConfig writes kwok's configuration to path: kwok's own default stages
// (KwokStages(bin), which `hack/tools.sh kwok` prints from the stages kwok embeds) with pod-complete
// limited to pods without KwokHoldAnnotation.
func WriteKwokConfig(bin, path string) error {
	src := KwokStages(bin)
	raw, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading kwok's stages (hack/tools.sh kwok writes them): %w", err)
	}
	// No KwokConfiguration document: kwok v0.8.0 takes an explicit one's unset options as zero
	// (playStageParallelism 0 refuses to start); KWOK_WORKDIR keeps a user's ~/.kwok/kwok.yaml out.
	var docs [][]byte
	held := false
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if meta.Kind == "" {
			continue
		}
		if meta.Kind == "Stage" && meta.Metadata.Name == "pod-complete" {
			if doc, err = withoutHeld(doc); err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
			held = true
		}
		docs = append(docs, bytes.TrimLeft(doc, "\n"))
	}
	if !held {
		return fmt.Errorf("%s has no Stage pod-complete to keep held pods Running", src)
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
