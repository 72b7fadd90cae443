package hypernode

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// labelConfig is a Volcano-format label source over three tiers of test labels.
const labelConfig = `
networkTopologyDiscovery:
  - source: label
    enabled: true
    interval: 1h
    config:
      networkTopologyTypes:
        fabric:
          - nodeLabel: test.hyperbatch.dev/top
          - nodeLabel: test.hyperbatch.dev/spine
          - nodeLabel: test.hyperbatch.dev/leaf
          - nodeLabel: kubernetes.io/hostname
`

// threeTiers creates 8 nodes: 2 per leaf, 2 leaves per spine, one top.
func threeTiers(t *testing.T) {
	for i, n := range []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
		node(t, n, map[string]string{
			"test.hyperbatch.dev/leaf":  []string{"l0", "l1", "l2", "l3"}[i/2],
			"test.hyperbatch.dev/spine": []string{"s0", "s1"}[i/4],
			"test.hyperbatch.dev/top":   "top",
		})
	}
}

const threeTierTree = `l0(1/leaf,label): n0 n1
l1(1/leaf,label): n2 n3
l2(1/leaf,label): n4 n5
l3(1/leaf,label): n6 n7
s0(2/spine,label): l0 l1
s1(2/spine,label): l2 l3
top(3/top,label): s0 s1`

// A first build writes each HyperNode once, children before parents, by server-side apply under the
// source's own field owner; later rounds with nothing changed write nothing.
func TestFirstBuildThenNoWrites(t *testing.T) {
	threeTiers(t)
	d := startDiscovery(t, labelConfig)

	w := d.settle(t, 0, threeTierTree)
	assert.Equal(t, []string{
		"PATCH hypernodes/l0", "PATCH hypernodes/l1", "PATCH hypernodes/l2", "PATCH hypernodes/l3",
		"PATCH hypernodes/s0", "PATCH hypernodes/s1", "PATCH hypernodes/top",
	}, w)
	top := getHyperNode(t, "top")
	require.NotNil(t, top)
	var owners []string
	for _, mf := range top.ManagedFields {
		owners = append(owners, mf.Manager+"/"+string(mf.Operation))
	}
	assert.Equal(t, []string{hypernode.FieldOwner("label") + "/Apply"}, owners)

	for i := 0; i < 3; i++ {
		n := d.writes.Len()
		require.NoError(t, d.round(t))
		assert.Empty(t, d.writes.Since(n), "round %d with nothing changed must write nothing", i+2)
	}
	assert.Len(t, d.writes.Since(0), 7)
	assert.Equal(t, threeTierTree, tree(t))
}

// A node that leaves leaves its leaf; a leaf left empty is deleted, its parent updated first.
func TestNodeRemoved(t *testing.T) {
	threeTiers(t)
	d := startDiscovery(t, labelConfig)
	d.settle(t, 0, threeTierTree)

	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	mark := d.writes.Len()
	require.NoError(t, env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n7"}}))
	want := strings.Replace(threeTierTree, "l3(1/leaf,label): n6 n7", "l3(1/leaf,label): n6", 1)
	assert.Equal(t, []string{"PATCH hypernodes/l3"}, d.settle(t, mark, want))

	mark = d.writes.Len()
	require.NoError(t, env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n6"}}))
	want = strings.Replace(strings.Replace(want, "l3(1/leaf,label): n6\n", "", 1), "s1(2/spine,label): l2 l3", "s1(2/spine,label): l2", 1)
	assert.Equal(t, []string{"PATCH hypernodes/s1", "DELETE hypernodes/l3"}, d.settle(t, mark, want), "the parent drops the leaf before the leaf goes")
}

// A switch renamed (the leaf label's value changes on all its nodes): the new leaf is created, the
// spine switched over, the old leaf deleted, in that order.
func TestSwitchRenamed(t *testing.T) {
	threeTiers(t)
	d := startDiscovery(t, labelConfig)
	d.settle(t, 0, threeTierTree)

	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	mark := d.writes.Len()
	for _, n := range []string{"n0", "n1"} {
		var obj corev1.Node
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: n}, &obj))
		obj.Labels["test.hyperbatch.dev/leaf"] = "rack7-a"
		require.NoError(t, env.Client.Update(ctx, &obj))
	}
	want := strings.Replace(strings.Replace(threeTierTree, "l0(1/leaf,label): n0 n1\n", "", 1), "s0(2/spine,label): l0 l1", "s0(2/spine,label): l1 rack7-a", 1) +
		"\n" + "rack7-a(1/leaf,label): n0 n1"
	want = sortLines(want)
	w := d.settle(t, mark, want)
	// The two relabels may land in one round or two; either way the old leaf goes last and the
	// spine never names a HyperNode that does not exist.
	require.NotEmpty(t, w)
	assert.Equal(t, "DELETE hypernodes/l0", w[len(w)-1])
	assert.Equal(t, "PATCH hypernodes/rack7-a", w[0])
	assert.Contains(t, w, "PATCH hypernodes/s0")
}

func sortLines(s string) string {
	lines := strings.Split(s, "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// HyperNodes without our source label, hand-made or another source's, are never touched, even when
// a discovered HyperNode would take the same name: that one gets a hash suffix instead.
func TestHandMadeLeftAlone(t *testing.T) {
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	handMade := func(name string, labels map[string]string) *topologyv1alpha1.HyperNode {
		hn := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: []topologyv1alpha1.MemberSpec{{Type: topologyv1alpha1.MemberTypeNode,
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: "elsewhere"}}}}}}
		require.NoError(t, env.Client.Create(ctx, hn))
		return hn
	}
	l0 := handMade("l0", nil)
	other := handMade("from-volcano", map[string]string{hypernode.SourceLabel: "ufm"})
	threeTiers(t)
	d := startDiscovery(t, labelConfig)

	renamed := hypernode.WithHash("l0", "fabric|test.hyperbatch.dev/top=top|test.hyperbatch.dev/spine=s0|test.hyperbatch.dev/leaf=l0")
	want := sortLines(strings.Replace(strings.Replace(threeTierTree, "l0(1/leaf,label)", renamed+"(1/leaf,label)", 1), "s0(2/spine,label): l0 l1", "s0(2/spine,label): "+renamed+" l1", 1) +
		"\nfrom-volcano(1/,ufm): elsewhere\nl0(1/,): elsewhere")
	w := d.settle(t, 0, want)
	assert.Contains(t, w, "PATCH hypernodes/"+renamed)
	assert.Zero(t, d.writes.For("hypernodes", "l0"))
	assert.Zero(t, d.writes.For("hypernodes", "from-volcano"))
	for _, hn := range []*topologyv1alpha1.HyperNode{l0, other} {
		got := getHyperNode(t, hn.Name)
		require.NotNil(t, got)
		assert.Equal(t, hn.ResourceVersion, got.ResourceVersion, "%s must be untouched", hn.Name)
	}

	// With every node gone, only our HyperNodes are deleted.
	require.NoError(t, env.Client.DeleteAllOf(ctx, &corev1.Node{}))
	d.settle(t, 0, "from-volcano(1/,ufm): elsewhere\nl0(1/,): elsewhere")
	assert.Zero(t, d.writes.For("hypernodes", "l0"))
	assert.Zero(t, d.writes.For("hypernodes", "from-volcano"))
}

// A provider error (the ibnetdiscover dump turned unreadable) leaves the tree as it was and writes
// nothing; a write refused by the API server is replied to the provider and the rest of its round
// is skipped, so no parent names a child that was not created; once accepted, the next round writes
// the difference.
func TestProviderError(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "controllers", "hypernode", "fabric", "testdata", "ibnetdiscover", "two-tier.txt"))
	require.NoError(t, err)
	ctx, cancel := framework.Context(60 * time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}}
	require.NoError(t, client.IgnoreAlreadyExists(env.Client.Create(ctx, ns)))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ib", Namespace: "fabric"}, Data: map[string]string{"ibnetdiscover.txt": string(dump)}}
	require.NoError(t, env.Client.Create(ctx, cm))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
	for _, n := range []string{"node00", "node01", "node02", "node03", "node04", "node05", "node06", "node07"} {
		node(t, n, nil)
	}
	d := startDiscovery(t, `
networkTopologyDiscovery:
  - source: ibnetdiscover
    enabled: true
    config:
      configMap: {namespace: fabric, name: ib, key: ibnetdiscover.txt}
`)
	const (
		leaf0 = "leaf-0002c90300a00030(1/leaf,ibnetdiscover): node00 node01"
		leaf1 = "leaf-0002c90300a00040(1/leaf,ibnetdiscover): node02 node03"
		leaf2 = "leaf-0002c90300a00050(1/leaf,ibnetdiscover): node04 node05"
		leaf3 = "leaf-0002c90300a00060(1/leaf,ibnetdiscover): node06 node07"
		spine = "spine-0002c90300a00010(2/spine,ibnetdiscover): leaf-0002c90300a00030 leaf-0002c90300a00040 leaf-0002c90300a00050 leaf-0002c90300a00060"
	)
	before := strings.Join([]string{leaf0, leaf1, leaf2, leaf3, spine}, "\n")
	assert.Len(t, d.settle(t, 0, before), 5, "4 leaves and a spine")

	// An unreadable dump: the round fails and nothing is written.
	cm.Data["ibnetdiscover.txt"] = "Switch garbage\n"
	require.NoError(t, env.Client.Update(ctx, cm))
	mark := d.writes.Len()
	framework.Eventually(t, 10*time.Second, "a round to fail on the new dump", func(context.Context) (bool, error) {
		err := d.round(t)
		return err != nil && strings.Contains(err.Error(), "parsing ibnetdiscover output: line 1"), nil
	})
	assert.Empty(t, d.writes.Since(mark))
	assert.Equal(t, before, tree(t))

	// A fabric where node07's second HCA lands on a new leaf, which joins node06/07's leaf into a
	// group named after the new, lower GUID. The API server refuses that leaf: the spine is not
	// updated and the old leaf not deleted.
	undeny := denyHyperNode(t, "leaf-0002c90300a00028")
	extra := "\nSwitch\t40 \"S-0002c90300a00028\"\t\t# \"MF0;leaf-new:MQM8790/U1\" enhanced port 0 lid 9 lmc 0\n" +
		"[1]\t\"S-0002c90300a00010\"[9]\t\t# \"MF0;spine-00:MQM8790/U1\" lid 5 4xNDR\n" +
		"[2]\t\"H-0002c903000b00f0\"[1](2c903000b00f1)\t\t# \"node07 mlx5_1\" lid 100 4xNDR\n"
	mark = d.writes.Len()
	cm.Data["ibnetdiscover.txt"] = string(dump) + extra
	require.NoError(t, env.Client.Update(ctx, cm))
	framework.Eventually(t, 20*time.Second, "the create of the new leaf to be refused", func(context.Context) (bool, error) {
		err := d.round(t)
		return err != nil && strings.Contains(err.Error(), "Create HyperNode leaf-0002c90300a00028"), nil
	})
	for _, w := range d.writes.Since(mark) {
		assert.Equal(t, "PATCH hypernodes/leaf-0002c90300a00028", w, "nothing after the refused create may be written")
	}
	assert.Equal(t, before, tree(t))

	// Once the API server accepts it, the next round (the provider's own retry or ours) writes the
	// difference, in order. Refused tries of the new leaf may still come first.
	mark = d.writes.Len()
	undeny()
	require.NoError(t, d.round(t))
	newLeaf := "leaf-0002c90300a00028(1/leaf,ibnetdiscover): node06 node07"
	after := strings.Join([]string{newLeaf, leaf0, leaf1, leaf2,
		"spine-0002c90300a00010(2/spine,ibnetdiscover): leaf-0002c90300a00028 leaf-0002c90300a00030 leaf-0002c90300a00040 leaf-0002c90300a00050"}, "\n")
	w := d.settle(t, mark, after)
	require.GreaterOrEqual(t, len(w), 3)
	assert.Equal(t, []string{"PATCH hypernodes/leaf-0002c90300a00028", "PATCH hypernodes/spine-0002c90300a00010", "DELETE hypernodes/leaf-0002c90300a00060"}, w[len(w)-3:])
	for _, x := range w[:len(w)-3] {
		assert.Equal(t, "PATCH hypernodes/leaf-0002c90300a00028", x)
	}
}

// denyHyperNode installs a ValidatingAdmissionPolicy that refuses writes of the HyperNode named name,
// waits until it is in force, and returns the function that removes it and waits until it is gone.
func denyHyperNode(t *testing.T, name string) (undeny func()) {
	t.Helper()
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"topology.volcano.sh"}, APIVersions: []string{"*"}, Resources: []string{"hypernodes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	require.NoError(t, env.Client.Create(ctx, vap))
	require.NoError(t, env.Client.Create(ctx, binding))
	probe := func(ctx context.Context) error {
		hn := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1}}
		return env.Client.Create(ctx, hn, client.DryRunAll)
	}
	framework.Eventually(t, 20*time.Second, "the policy to refuse "+name, func(ctx context.Context) (bool, error) {
		return probe(ctx) != nil, nil
	})
	removed := false
	undeny = func() {
		if removed {
			return
		}
		removed = true
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), vap)
		framework.Eventually(t, 20*time.Second, "the policy to let "+name+" through", func(ctx context.Context) (bool, error) {
			// The provider's own retry may have created it already.
			err := probe(ctx)
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
	}
	t.Cleanup(undeny)
	return undeny
}
