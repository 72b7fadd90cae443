package builders

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"
)

// JobSetExample is one JobSet manifest published by the JobSet project.
type JobSetExample struct {
	// Source is the file and block it was read from, e.g. "keps/104-StartupPolicy/README.md#1".
	Source string
	JobSet *jobsetv1alpha2.JobSet
	// Raw is the block's text.
	Raw []byte
	// Err is why the block does not decode as a JobSet (nil when it does).
	Err error
}

// JobSetKEPExamples reads the JobSet manifests of the JobSet module's KEPs (the ```yaml blocks of
// keps/*/README.md with kind: JobSet) from the Go module cache, at the version go.mod pins. JobSet's
// site/static/examples are not part of its Go module; the KEPs are, and show the same features
// (startupPolicy InOrder, dependsOn, failure policies). Blocks are returned in file order.
func JobSetKEPExamples() ([]JobSetExample, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the jobset module (go mod download sigs.k8s.io/jobset): %w", err)
	}
	root := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(root, "keps", "*", "README.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var exs []JobSetExample
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, block := range yamlBlocks(raw) {
			if !bytes.Contains(block, []byte("kind: JobSet")) {
				continue
			}
			ex := JobSetExample{Source: fmt.Sprintf("%s#%d", filepath.ToSlash(rel), i+1), Raw: block}
			js := &jobsetv1alpha2.JobSet{}
			if err := yaml.Unmarshal(block, js); err != nil {
				ex.Err = err
			} else {
				ex.JobSet = js
			}
			exs = append(exs, ex)
		}
	}
	if len(exs) == 0 {
		return nil, fmt.Errorf("no JobSet manifest in %s/keps/*/README.md", root)
	}
	return exs, nil
}

// yamlBlocks returns the bodies of the ```yaml fenced blocks of a Markdown file.
func yamlBlocks(md []byte) [][]byte {
	var out [][]byte
	var cur *bytes.Buffer
	for _, line := range strings.Split(string(md), "\n") {
		trim := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trim, "```yaml"):
			cur = &bytes.Buffer{}
		case cur != nil && strings.HasPrefix(trim, "```"):
			out = append(out, cur.Bytes())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}
