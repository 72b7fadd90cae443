package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// TestKubeVersionMatchesCompatibilityDoc keeps Chart.yaml's kubeVersion, docs/compatibility.md and the
// control planes make test runs on in agreement: Helm must accept exactly the minors the page lists
// (checked by rendering the chart for each minor from 1.30 to 1.40, so Helm's own constraint parser
// decides), the page must quote the chart's kubeVersion, and hack/tools.sh must build exactly those
// minors' control planes.
func TestKubeVersionMatchesCompatibilityDoc(t *testing.T) {
	root := framework.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil || chart.KubeVersion == "" {
		t.Fatalf("Chart.yaml has no kubeVersion (err %v)", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), fmt.Sprintf("`kubeVersion: %q`", chart.KubeVersion)) {
		t.Errorf("docs/compatibility.md does not quote Chart.yaml's kubeVersion %q", chart.KubeVersion)
	}
	documented := minorsIn(t, regexp.MustCompile(`Supported kube-apiserver minors: \*\*([0-9., ]+)\*\*`), string(doc), "docs/compatibility.md's supported minors")

	var accepted []int
	for minor := 30; minor <= 40; minor++ {
		_, err := helm(t, "template", "hb", chartDir(), "--namespace", namespace, "--kube-version", fmt.Sprintf("1.%d.0", minor))
		switch {
		case err == nil:
			accepted = append(accepted, minor)
		case !strings.Contains(err.Error(), "kubeVersion"):
			t.Fatalf("rendering for 1.%d failed for another reason than kubeVersion: %v", minor, err)
		}
	}
	if !slices.Equal(accepted, documented) {
		t.Errorf("Helm accepts the chart on minors %v (kubeVersion %q), docs/compatibility.md lists %v", accepted, chart.KubeVersion, documented)
	}

	tools, err := os.ReadFile(filepath.Join(root, "hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^declare -A K8S_VERSION=\((.*)\)$`).FindStringSubmatch(string(tools))
	if line == nil {
		t.Fatal("hack/tools.sh has no K8S_VERSION table")
	}
	built := minorsIn(t, regexp.MustCompile(`v(1\.[0-9]+)\.[0-9]+`), line[1], "hack/tools.sh's control planes")
	if !slices.Equal(built, documented) {
		t.Errorf("hack/tools.sh builds control planes %v, docs/compatibility.md lists %v", built, documented)
	}
}

// minorsIn collects the sorted, distinct 1.N minors the pattern's first group finds in s.
func minorsIn(t *testing.T, re *regexp.Regexp, s, what string) []int {
	t.Helper()
	var out []int
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		for _, v := range strings.Split(m[1], ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			minor, err := strconv.Atoi(strings.TrimPrefix(v, "1."))
			if err != nil || !strings.HasPrefix(v, "1.") {
				t.Fatalf("%s: %q is not a 1.N minor", what, v)
			}
			if !slices.Contains(out, minor) {
				out = append(out, minor)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no minors found", what)
	}
	slices.Sort(out)
	return out
}
