package chart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/namespacelabel"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
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

// rbacObjects are the chart's ServiceAccounts, RBAC objects and admission policies.
func rbacObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return kinds(render(t), "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
}

// forbidden asserts the apiserver refused a request for lack of permission.
func forbidden(t *testing.T, err error, what string) {
	t.Helper()
	assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
}

// The scheduler's ClusterRole is upstream's system:kube-scheduler (as the apiserver under test
// serves it) without its Lease rules, plus the plugin's reads and its PodGroup patch (the placement
// annotation): nothing more, nothing missing.
func TestSchedulerRBACMatchesKubeScheduler(t *testing.T) {
	var upstream rbacv1.ClusterRole
	require.NoError(t, env(t).Client.Get(context.Background(), client.ObjectKey{Name: "system:kube-scheduler"}, &upstream))
	var want []string
	for _, g := range grants(upstream.Rules) {
		if !strings.HasPrefix(g, "coordination.k8s.io lease") { // leases and leasecandidates
			want = append(want, g)
		}
	}
	want = append(want, grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"topology.volcano.sh"}, Resources: []string{"hypernodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"scheduling.volcano.sh"}, Resources: []string{"podgroups"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"scheduling.volcano.sh"}, Resources: []string{"queues"}, Verbs: []string{"get", "list", "watch"}},
	})...)
	slices.Sort(want)
	var cr rbacv1.ClusterRole
	require.True(t, find(t, render(t), "ClusterRole", "hyperbatch-scheduler", &cr))
	assert.Equal(t, want, grants(cr.Rules),
		"charts/hyperbatch/templates/rbac-scheduler.yaml's ClusterRole must be system:kube-scheduler without Leases, plus HyperNodes, PodGroups and Queues")
	for _, b := range kinds(render(t), "ClusterRoleBinding") {
		ref, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		assert.NotEqual(t, "system:kube-scheduler", ref, "%s binds system:kube-scheduler, which may update every Lease named kube-scheduler", b.GetName())
	}
}

// Impersonating hyperbatch-scheduler's ServiceAccount against a real kube-apiserver with the chart's
// roles: its own Lease may be created, read and updated; kube-scheduler's Lease, node heartbeats and
// other Leases may not; the one ConfigMap of delegated authentication is readable in kube-system,
// no other ConfigMap anywhere.
func TestSchedulerRBAC(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	apply(t, rbacObjects(t), false)
	sched := as(t, "hyperbatch-scheduler")

	// Leases of others, created by the admin.
	others := []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-controller-manager"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "node-1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hyperbatch-manager.hyperbatch.dev"}},
	}
	for _, l := range others {
		require.NoError(t, client.IgnoreAlreadyExists(e.Client.Create(ctx, l.DeepCopy())))
	}
	// RBAC changes reach the authorizer through its informers: wait for the first grant.
	own := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hyperbatch-scheduler"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a")}}
	framework.Eventually(t, 30*time.Second, "the scheduler creating its own Lease", func(ctx context.Context) (bool, error) {
		return true, client.IgnoreAlreadyExists(sched.Create(ctx, own.DeepCopy()))
	})
	var got coordinationv1.Lease
	require.NoError(t, sched.Get(ctx, client.ObjectKeyFromObject(own), &got), "get own Lease")
	got.Spec.HolderIdentity = ptr.To("replica-b")
	require.NoError(t, sched.Update(ctx, &got), "update own Lease")

	for _, l := range others {
		var cur coordinationv1.Lease
		require.NoError(t, e.Client.Get(ctx, client.ObjectKeyFromObject(l), &cur))
		cur.Spec.HolderIdentity = ptr.To("hyperbatch-scheduler")
		forbidden(t, sched.Update(ctx, &cur), "update Lease "+l.Namespace+"/"+l.Name)
		forbidden(t, sched.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}), "get Lease "+l.Namespace+"/"+l.Name)
	}
	forbidden(t, sched.List(ctx, &coordinationv1.LeaseList{}), "list Leases cluster-wide")
	forbidden(t, sched.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace("kube-node-lease")), "list node Leases")

	var cm corev1.ConfigMap
	require.NoError(t, sched.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, &cm),
		"read the delegated-authentication ConfigMap")
	forbidden(t, sched.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{}), "get a ConfigMap in default")
	forbidden(t, sched.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "hyperbatch-scheduler-config"}, &corev1.ConfigMap{}), "get a ConfigMap in its own namespace")
	forbidden(t, sched.List(ctx, &corev1.ConfigMapList{}), "list ConfigMaps cluster-wide")
	forbidden(t, sched.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("kube-system")), "list ConfigMaps in kube-system")
}

// Impersonating hyperbatch-manager's ServiceAccount against a real kube-apiserver with the chart's
// roles and ValidatingAdmissionPolicy: changing a pod-security label (or any other label, annotation
// or finalizer) of a Namespace is refused; the pod-webhook label and its managed annotation may be
// set and removed; other users are unaffected.
func TestManagerNamespacePolicy(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	apply(t, rbacObjects(t), false)
	mgr := as(t, "hyperbatch-manager")
	ns := builders.Namespace("tenant-psa", map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "team": "a"},
		map[string]string{"owner": "team-a"})
	require.NoError(t, e.Client.Create(ctx, ns))

	patch := func(c client.Client, p string) error {
		return c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(p)))
	}
	// The policy and its binding reach the admission plugin through informers: wait until it refuses
	// a change of a probe namespace's label (each attempt a new value, so none is a no-op; RBAC allows
	// the patch, so only the policy can refuse it).
	probe := builders.Namespace("policy-probe", nil, nil)
	require.NoError(t, client.IgnoreAlreadyExists(e.Client.Create(ctx, probe)))
	attempt := 0
	framework.Eventually(t, 30*time.Second, "the policy refusing the manager's label change", func(context.Context) (bool, error) {
		attempt++
		err := mgr.Patch(ctx, probe.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"probe":"%d"}}}`, attempt))))
		if err != nil && !apierrors.IsForbidden(err) {
			return false, err
		}
		return err != nil, nil
	})
	const lowerPSA = `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`
	refusal := patch(mgr, lowerPSA)
	require.Error(t, refusal, "the manager may not lower a namespace's pod-security level")
	assert.True(t, apierrors.IsForbidden(refusal), "want Forbidden, got %v", refusal)
	assert.Contains(t, refusal.Error(), "hyperbatch-manager may change only the label hyperbatch.dev/pod-webhook")

	for what, p := range map[string]string{
		"remove a pod-security label": `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null}}}`,
		"add a label":                 `{"metadata":{"labels":{"pod-security.kubernetes.io/warn":"privileged"}}}`,
		"change an annotation":        `{"metadata":{"annotations":{"owner":"someone-else"}}}`,
		"add a finalizer":             `{"metadata":{"finalizers":["example.com/hold"]}}`,
		"our label and a foreign one": `{"metadata":{"labels":{"hyperbatch.dev/pod-webhook":"enabled","team":"b"}}}`,
	} {
		assert.Error(t, patch(mgr, p), "the manager may not %s", what)
	}
	require.NoError(t, patch(mgr, `{"metadata":{"labels":{"hyperbatch.dev/pod-webhook":"enabled"},"annotations":{"hyperbatch.dev/pod-webhook-managed":"true"}}}`),
		"the manager may set its own label and annotation")
	require.NoError(t, patch(mgr, `{"metadata":{"labels":{"hyperbatch.dev/pod-webhook":null},"annotations":{"hyperbatch.dev/pod-webhook-managed":null}}}`),
		"the manager may remove its own label and annotation")
	require.NoError(t, patch(e.Client, lowerPSA), "other users are not affected by the policy")

	var got corev1.Namespace
	require.NoError(t, e.Client.Get(ctx, client.ObjectKey{Name: ns.Name}, &got))
	assert.Equal(t, map[string]string{"pod-security.kubernetes.io/enforce": "privileged", "team": "a", "kubernetes.io/metadata.name": ns.Name}, got.Labels)
	assert.Equal(t, map[string]string{"owner": "team-a"}, got.Annotations)
	assert.Empty(t, got.Finalizers)
}

// The real namespacelabel controller, running as the manager's ServiceAccount under the chart's
// roles and policy, still labels a governed namespace and unlabels it when no policy governs it.
func TestNamespaceLabelControllerUnderPolicy(t *testing.T) {
	e := env(t)
	apply(t, rbacObjects(t), false)
	m, err := ctrl.NewManager(impersonating(t, "hyperbatch-manager"), ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	require.NoError(t, namespacelabel.NewReconciler(m, namespace).SetupWithManager(m))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	ns := builders.Namespace("tenant-governed", map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "team": "label-test"}, nil)
	require.NoError(t, e.Client.Create(ctx, ns))
	pol := builders.MakePolicy("label-test").Selector("team", "label-test").Queue("q").Obj()
	require.NoError(t, e.Client.Create(ctx, pol))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), pol) })
	labelled := func(want bool) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			var got corev1.Namespace
			if err := e.Client.Get(ctx, client.ObjectKey{Name: ns.Name}, &got); err != nil {
				return false, err
			}
			on := got.Labels[hbv1.PodWebhookLabel] == hbv1.PodWebhookLabelEnabled && got.Annotations[hbv1.PodWebhookManagedAnnotation] == "true"
			return on == want && got.Labels["pod-security.kubernetes.io/enforce"] == "baseline", nil
		}
	}
	framework.Eventually(t, 30*time.Second, "the controller labelling the governed namespace", labelled(true))
	require.NoError(t, e.Client.Delete(ctx, pol))
	framework.Eventually(t, 30*time.Second, "the controller removing its label", labelled(false))
}
