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

// product is every package of the product: what tests, tools and benchmarks exercise.
var product = []string{"api/", "internal/", "webhook", "controllers/", "certs", "scheduler-plugin/", "cmd/"}

// rules: for each package prefix (longest match wins), the prefixes of our packages it may import
// from non-test files. Below test/, hack/ and bench/ (the harness) test files count too: nothing
// imports a suite, a benchmark or a tool, and the shared harness packages (test/util/...,
// test/integration/framework) import no suite.
var rules = []struct {
	pkg   string
	allow []string
}{
	// The harness.
	{"test/util/localproc", nil},
	{"test/util/", []string{"api/v1alpha1", "test/util/"}},
	{"test/integration/framework", append([]string{"test/integration/framework", "test/util/"}, product...)},
	{"test/integration/", append([]string{"test/integration/framework", "test/util/"}, product...)},
	{"test/e2e", append([]string{"test/e2e", "test/integration/framework", "test/util/"}, product...)},
	{"test/chart", append([]string{"test/integration/framework", "test/util/"}, product...)},
	{"test/arch", nil},
	{"hack/localcluster", []string{"test/util/localproc", "controllers/hypernode"}},
	{"hack/", nil},
	{"bench/", append([]string{"test/integration/framework", "test/util/"}, product...)},

	{"api/", nil},
	{"internal/defaults", []string{"api/v1alpha1"}},
	{"internal/naming", nil},
	{"internal/hyperjobstatus", nil},
	{"internal/autosplit", nil},
	{"internal/gangcontract", nil},
	{"internal/jsonpatch", nil},
	{"internal/scheme", []string{"api/v1alpha1"}},
	{"internal/enqueue", []string{"api/v1alpha1"}},
	{"internal/policyinputs", []string{"api/v1alpha1", "internal/defaults"}},
	{"internal/workload", []string{"api/v1alpha1", "internal/defaults", "internal/hyperjobstatus"}},
	{"internal/admissionpolicy", []string{"api/v1alpha1", "internal/defaults", "internal/workload"}},
	{"internal/placementsvg", nil},
	{"internal/karmadainterpreter", nil},
	// kubectl-hyperbatch reads the engine, the kind registry and the scheduler's topology cache; it
	// never imports a controller or the webhook.
	{"internal/cli/", []string{"api/v1alpha1", "internal/cli/", "internal/defaults", "internal/workload", "internal/scheme", "internal/placementsvg",
		"internal/gangcontract", "scheduler-plugin/topology"}},
	{"webhook", []string{"api/v1alpha1", "internal/", "webhook"}},
	{"controllers/", []string{"api/v1alpha1", "internal/defaults", "internal/naming", "internal/hyperjobstatus", "internal/enqueue", "internal/scheme", "internal/policyinputs", "internal/autosplit", "internal/gangcontract", "internal/admissionpolicy", "internal/workload"}},
	// HyperNode discovery: the framework, its config and fabric packages and the providers import
	// one another (and the source label's key in api/v1alpha1), never another controller.
	{"controllers/hypernode", []string{"controllers/hypernode", "api/v1alpha1"}},
	{"certs", nil},
	// The scheduler shares only the gang order and PodGroup reasons with the manager.
	{"scheduler-plugin/", []string{"scheduler-plugin/", "internal/gangcontract"}},
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// isHarness reports whether pkg is test, tool or benchmark code, whose test files are checked too.
func isHarness(pkg string) bool {
	for _, p := range []string{"test/", "hack/", "bench/"} {
		if strings.HasPrefix(pkg, p) {
			return true
		}
	}
	return false
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if strings.HasSuffix(path, "_test.go") && !isHarness(pkg) {
			return nil
		}
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

// The harness rules keep suites, benchmarks and tools out of each other: only the shared packages
// are importable.
func TestHarnessRules(t *testing.T) {
	allows := func(pkg, imp string) bool {
		allow, ok := ruleFor(pkg)
		require.True(t, ok, "no rule for %s", pkg)
		for _, a := range allow {
			if strings.HasPrefix(imp, a) {
				return true
			}
		}
		return false
	}
	require.True(t, isHarness("bench/scheduler"))
	require.False(t, isHarness("controllers/podgroup"))
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"hack/localcluster", "test/util/localproc", true},
		{"hack/localcluster", "test/integration/framework", false},
		{"test/util/localproc", "test/integration/framework", false},
		{"test/integration/framework", "test/util/localproc", true},
		{"test/integration/framework", "bench/scheduler", false},
		{"test/integration/scheduler", "test/integration/controllers/podgroupstatus", false},
		{"test/e2e", "test/util/builders", true},
		{"bench/hyperjob", "test/integration/framework", true},
		{"bench/hyperjob", "hack/localcluster", false},
	} {
		require.Equal(t, c.ok, allows(c.pkg, c.imp), "%s importing %s", c.pkg, c.imp)
	}
}
