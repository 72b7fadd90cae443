package builders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// VolcanoExample is one Volcano Job manifest of Volcano's own examples.
type VolcanoExample struct {
	// Source is the file below example/ and the document's index in it, e.g. "job-plugin.yaml#0".
	Source string
	Job    *batchv1alpha1.Job
}

// VolcanoModuleDir is the volcano.sh/volcano module's directory in the Go module cache, at the
// version hack/tools/volcano pins (the one the project's Volcano binaries are built from).
func VolcanoModuleDir() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "mod", "download", "-json", "volcano.sh/volcano")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "tools", "volcano")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download volcano.sh/volcano (in hack/tools/volcano): %w", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("reading go mod download's answer %q: %w", out, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download's answer %q names no directory", out)
	}
	return m.Dir, nil
}

// VolcanoExampleJobs reads every batch.volcano.sh/v1alpha1 Job of the module's example/ directory
// (each YAML document of each .yaml file), in file order. Documents of other kinds are skipped; a
// Job document that does not decode is an error naming it.
func VolcanoExampleJobs() ([]VolcanoExample, error) {
	dir, err := VolcanoModuleDir()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "example")
	var out []VolcanoExample
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			var head struct{ APIVersion, Kind string }
			if yaml.Unmarshal(doc, &head) != nil || head.APIVersion != batchv1alpha1.SchemeGroupVersion.String() || head.Kind != "Job" {
				continue
			}
			job := &batchv1alpha1.Job{}
			if err := yaml.Unmarshal(doc, job); err != nil {
				return fmt.Errorf("volcano example %s#%d: %w", rel, i, err)
			}
			out = append(out, VolcanoExample{Source: fmt.Sprintf("%s#%d", rel, i), Job: job})
		}
		return nil
	})
	return out, err
}
