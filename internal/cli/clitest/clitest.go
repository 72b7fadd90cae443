// Package clitest is what the kubectl-hyperbatch command tests share: the recorded cluster
// (testdata/localcluster.yaml, objects a make-run cluster stored) and golden files, regenerated with
// `go test ./internal/cli/... -update`.
package clitest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files of internal/cli/... from the current output")

// Dir is internal/cli/testdata.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Recorded decodes a recorded file of internal/cli/testdata.
func Recorded(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// Golden compares got with testdata/golden/<name>, or rewrites it with -update.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join(Dir(), "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the golden file (regenerate with go test -update if the change is intended):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// Render writes r in format f and compares it with the golden file <name>.<f>.
func Render(t testing.TB, name string, f output.Format, r output.Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := output.Print(&buf, f, r); err != nil {
		t.Fatal(err)
	}
	ext := string(f)
	if f == output.Table {
		ext = "txt"
	}
	Golden(t, name+"."+ext, buf.Bytes())
}
