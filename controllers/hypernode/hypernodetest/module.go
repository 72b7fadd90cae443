package hypernodetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fabricPins is the module that pins the public fabric captures the tests read, relative to the
// repository root.
const fabricPins = "hack/tools/fabric/go.mod"

// Topograph is the module path of NVIDIA Topograph, whose ibnetdiscover capture the golden tests read.
const Topograph = "github.com/NVIDIA/topograph"

// ModuleDir returns the directory of module in the Go module cache, at the version
// hack/tools/fabric/go.mod pins, downloading it through the module proxy when needed. Nothing of it
// is copied into the repository.
func ModuleDir(t *testing.T, module string) string {
	t.Helper()
	root := repoRoot(t)
	version := pinnedVersion(t, filepath.Join(root, fabricPins), module)
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = filepath.Join(root, filepath.Dir(fabricPins))
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s@%s (check GOPROXY)", module, version)
	var info struct{ Dir, Error string }
	require.NoError(t, json.Unmarshal(out, &info))
	require.Empty(t, info.Error)
	require.DirExists(t, info.Dir)
	return info.Dir
}

func pinnedVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	f, err := os.Open(gomod)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(w) >= 2 && w[0] == module {
			return w[1]
		}
	}
	require.NoError(t, sc.Err())
	require.FailNow(t, fmt.Sprintf("%s does not pin %s", gomod, module))
	return ""
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/hyperbatch/hyperbatch\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "repository root not found above the test's directory")
		dir = parent
	}
}
