package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The multi-cluster demo's hints name the children's kind, Volcano Jobs: `get jobs` lists batch/v1
// Jobs, and a user following the hint saw none (issue 38). No hint of the package says `get jobs`
// or `get job` bare.
func TestHintsNameVolcanoJobs(t *testing.T) {
	h := childrenHint("bin/kubectl", "hyperbatch-member1", "hyperbatch-demo")
	if h != "bin/kubectl --context hyperbatch-member1 -n hyperbatch-demo get jobs.batch.volcano.sh,pods" {
		t.Errorf("hint %q", h)
	}
	bare := regexp.MustCompile(`get (?:[a-z,]*,)?jobs?(?:[,\s)]|$)`)
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if bare.MatchString(line) {
				t.Errorf("%s:%d: a hint lists batch/v1 Jobs, not the Volcano Jobs a HyperJob makes: %s", f.Name(), i+1, strings.TrimSpace(line))
			}
		}
	}
}
