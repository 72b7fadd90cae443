package chart

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// grants flattens RBAC rules into one "group resource[/name] verb" line per permission, so two
// rule lists that grant the same permissions compare equal however their rules are grouped.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						what := res
						if n != "" {
							what += "/" + n
						}
						out = append(out, strings.Join([]string{g, what, v}, " "))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// generatedRoles reads config/rbac/role.yaml, which `make generate` writes with controller-gen from
// the +kubebuilder:rbac markers of cmd/manager, controllers/, webhook/ and certs/.
func generatedRoles(t *testing.T) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	path := filepath.Join(framework.RepoRoot(), "config", "rbac", "role.yaml")
	f, err := os.Open(path)
	require.NoError(t, err, "run `make generate`")
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u map[string]any
		if err := dec.Decode(&u); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "decoding %s", path)
		}
		if len(u) == 0 {
			continue
		}
		switch u["kind"] {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, &r))
			cluster = r.Rules
		case "Role":
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u, &r))
			namespaced = r.Rules
		}
	}
	require.NotEmpty(t, cluster, "%s has no ClusterRole", path)
	require.NotEmpty(t, namespaced, "%s has no Role", path)
	return cluster, namespaced
}

// The manager's roles in the chart grant exactly what the code's +kubebuilder:rbac markers ask for:
// no permission missing (the manager would fail at run time) and none extra (least privilege).
// The scheduler's role (rbac-scheduler.yaml) is written by hand: it is the kube-scheduler's.
func TestManagerRBACMatchesMarkers(t *testing.T) {
	wantCluster, wantNamespaced := generatedRoles(t)
	objs := render(t)
	var cr rbacv1.ClusterRole
	require.True(t, find(t, objs, "ClusterRole", "hyperbatch-manager", &cr), "the chart renders no ClusterRole hyperbatch-manager")
	var r rbacv1.Role
	require.True(t, find(t, objs, "Role", "hyperbatch-manager", &r), "the chart renders no Role hyperbatch-manager")
	assert.Equal(t, grants(wantCluster), grants(cr.Rules),
		"charts/hyperbatch/templates/rbac-manager.yaml ClusterRole differs from config/rbac/role.yaml (generated from the +kubebuilder:rbac markers)")
	assert.Equal(t, grants(wantNamespaced), grants(r.Rules),
		"charts/hyperbatch/templates/rbac-manager.yaml Role differs from config/rbac/role.yaml (generated from the +kubebuilder:rbac markers)")
}

func TestGrants(t *testing.T) {
	a := []rbacv1.PolicyRule{{APIGroups: []string{"", "x"}, Resources: []string{"r"}, Verbs: []string{"get", "list"}}}
	b := []rbacv1.PolicyRule{
		{APIGroups: []string{"x"}, Resources: []string{"r"}, Verbs: []string{"list", "get"}},
		{APIGroups: []string{""}, Resources: []string{"r"}, Verbs: []string{"get", "list", "get"}},
	}
	assert.Equal(t, grants(a), grants(b))
	c := []rbacv1.PolicyRule{{APIGroups: []string{"x"}, Resources: []string{"r"}, ResourceNames: []string{"n"}, Verbs: []string{"get"}}}
	assert.Equal(t, []string{"x r/n get"}, grants(c))
	assert.NotEqual(t, grants(a), grants(c))
}
