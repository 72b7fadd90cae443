package builders

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"sigs.k8s.io/yaml"
)

// KarmadaSample reads a PropagationPolicy from Karmada's own samples in the Go module cache, the
// version go.mod pins (e.g. "nginx/propagationpolicy.yaml"), into namespace; tests then judge what
// Karmada's users actually apply, without a copy in this repository.
func KarmadaSample(rel, namespace string) (*policyv1alpha1.PropagationPolicy, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/karmada-io/karmada").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the karmada module (go mod download github.com/karmada-io/karmada): %w", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "samples", rel)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Karmada's sample: %w", err)
	}
	pp := &policyv1alpha1.PropagationPolicy{}
	if err := yaml.UnmarshalStrict(raw, pp); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	pp.Namespace = namespace
	return pp, nil
}
