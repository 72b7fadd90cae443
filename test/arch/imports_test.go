// Package arch checks the package import rules of docs/design.md ("Packages and what each may
// import") on the source tree.
package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/hyperbatch/hyperbatch/"

// rules: for each package prefix (longest match wins), the prefixes of our packages it may import
// from non-test files.
var rules = []struct {
	pkg   string
	allow []string
}{
	{"api/", nil},
	{"internal/defaults", []string{"api/v1alpha1"}},
	{"internal/naming", nil},
	{"internal/hyperjobstatus", nil},
	{"internal/autosplit", nil},
	{"internal/jsonpatch", nil},
	{"internal/scheme", []string{"api/v1alpha1"}},
	{"internal/enqueue", []string{"api/v1alpha1"}},
	{"internal/policyinputs", []string{"api/v1alpha1", "internal/defaults"}},
	{"webhook", []string{"api/v1alpha1", "internal/", "webhook"}},
	{"controllers/", []string{"api/v1alpha1", "internal/defaults", "internal/naming", "internal/hyperjobstatus", "internal/enqueue", "internal/scheme", "internal/policyinputs", "internal/autosplit"}},
	// HyperNode discovery: the framework, its config and fabric packages and the providers import
	// one another, never another controller.
	{"controllers/hypernode", []string{"controllers/hypernode"}},
	{"certs", nil},
	{"scheduler-plugin/", []string{"scheduler-plugin/"}},
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func ruleFor(pkg string) (allow []string, ok bool) {
	best := -1
	for i, r := range rules {
		if strings.HasPrefix(pkg, r.pkg) && (best < 0 || len(r.pkg) > len(rules[best].pkg)) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return rules[best].allow, true
}

func TestImportRules(t *testing.T) {
	root := repoRoot()
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name != "." && (strings.HasPrefix(name, ".") || name == "_output" || name == "bin" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		allow, ok := ruleFor(pkg)
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			ours, isOurs := strings.CutPrefix(p, module)
			if !isOurs || ours == pkg {
				continue
			}
			allowed := false
			for _, a := range allow {
				allowed = allowed || strings.HasPrefix(ours, a)
			}
			if !allowed {
				t.Errorf("%s imports %s: %s may import only %v of ours (docs/design.md)", path, ours, pkg, allow)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 20, "no Go files found under %s", root)
}
