package hypernode_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
)

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"Rack_7.Leaf A":         "rack-7-leaf-a",
		"--x--":                 "x",
		"":                      "hypernode",
		"ÄÖ":                    "hypernode",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		assert.Equal(t, want, hypernode.CleanName(in), in)
	}
	h := hypernode.WithHash(strings.Repeat("b", 63), "id")
	assert.Len(t, h, 63)
	assert.Equal(t, h, hypernode.WithHash(strings.Repeat("b", 63), "id"), "stable")
	assert.NotEqual(t, h, hypernode.WithHash(strings.Repeat("b", 63), "id2"))
}

// Collisions (two hints cleaning to one name, or a name another writer holds) get a hash of the
// group's ID; empty groups and their empty parents are dropped.
func TestBuildNamesAndPruning(t *testing.T) {
	groups := []hypernode.Group{
		{ID: "a", NameHint: "Rack A", Tier: 1, Nodes: []string{"n2", "n1"}},
		{ID: "b", NameHint: "rack-a", Tier: 1, Nodes: []string{"n3"}},
		{ID: "c", NameHint: "handmade", Tier: 1, Nodes: []string{"n4"}},
		{ID: "empty", NameHint: "empty", Tier: 1},
		{ID: "top", NameHint: "top", Tier: 2, Children: []string{"a", "b", "c"}},
		{ID: "empty-top", NameHint: "empty-top", Tier: 2, Children: []string{"empty"}},
	}
	hns, err := hypernode.Build("label", groups, func(n string) bool { return n == "handmade" })
	require.NoError(t, err)
	a, b, c := hypernode.WithHash("rack-a", "a"), hypernode.WithHash("rack-a", "b"), hypernode.WithHash("handmade", "c")
	assert.ElementsMatch(t, []string{"2  top: " + strings.Join(sorted(a, b, c), " "), "1  " + c + ": n4", "1  " + a + ": n1 n2", "1  " + b + ": n3"},
		strings.Split(strings.TrimSuffix(hypernodetest.Render(hns), "\n"), "\n"))
	for _, hn := range hns {
		assert.Equal(t, "label", hn.Labels[hypernode.SourceLabel])
	}
}

func sorted(s ...string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

func TestBuildRefusesBadTrees(t *testing.T) {
	for name, c := range map[string]struct {
		groups []hypernode.Group
		want   string
	}{
		"child not lower": {[]hypernode.Group{{ID: "a", Tier: 2, Nodes: []string{"n"}}, {ID: "b", Tier: 2, Children: []string{"a"}}}, "a child's tier must be lower"},
		"two parents": {[]hypernode.Group{{ID: "a", Tier: 1, Nodes: []string{"n"}}, {ID: "p", Tier: 2, Children: []string{"a"}},
			{ID: "q", Tier: 2, Children: []string{"a"}}}, "child of both"},
		"missing child": {[]hypernode.Group{{ID: "p", Tier: 2, Children: []string{"x"}}}, "missing child x"},
		"cycle":         {[]hypernode.Group{{ID: "a", Tier: 1, Children: []string{"b"}}, {ID: "b", Tier: 2, Children: []string{"a"}}}, "must be lower"},
		"tier 0":        {[]hypernode.Group{{ID: "a", Tier: 0}}, "tiers start at 1"},
		"duplicate":     {[]hypernode.Group{{ID: "a", Tier: 1}, {ID: "a", Tier: 1}}, "appears twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := hypernode.Build("s", c.groups, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func hn(name string, tier int, members ...string) *topologyv1alpha1.HyperNode {
	typ := topologyv1alpha1.MemberTypeNode
	if tier > 1 {
		typ = topologyv1alpha1.MemberTypeHyperNode
	}
	h := &topologyv1alpha1.HyperNode{}
	h.Name, h.Labels, h.Spec.Tier = name, map[string]string{hypernode.SourceLabel: "s"}, tier
	for _, m := range members {
		h.Spec.Members = append(h.Spec.Members, topologyv1alpha1.MemberSpec{Type: typ,
			Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: m}}})
	}
	return h
}

func kinds(evs []hypernode.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, string(e.Type)+" "+e.HyperNode.Name)
	}
	return out
}

// Diff writes nothing for an unchanged tree; otherwise creates go children first, updates low to
// high, deletes parents first, so no reader sees a missing member.
func TestDiffOrder(t *testing.T) {
	existing := []*topologyv1alpha1.HyperNode{hn("top", 3, "s1"), hn("s1", 2, "l1", "l2"), hn("l1", 1, "n1"), hn("l2", 1, "n2"), hn("old-s", 2, "old-l"), hn("old-l", 1, "n9")}
	assert.Empty(t, hypernode.Diff(existing, existing))

	// Member order does not matter.
	assert.Empty(t, hypernode.Diff([]*topologyv1alpha1.HyperNode{hn("s1", 2, "l2", "l1")}, []*topologyv1alpha1.HyperNode{hn("s1", 2, "l1", "l2")}))

	desired := []*topologyv1alpha1.HyperNode{hn("top", 3, "s1", "s2"), hn("s1", 2, "l1"), hn("s2", 2, "l3"), hn("l1", 1, "n1", "n2"), hn("l3", 1, "n3")}
	assert.Equal(t, []string{
		"Create l3", "Create s2",
		"Update l1", "Update s1", "Update top",
		"Delete old-s", "Delete l2", "Delete old-l",
	}, kinds(hypernode.Diff(desired, existing)))
}

// A HyperNode taken over from Volcano's label discovery keeps its tierName when it is the whole key
// of ours (volcano.sh/tor for tor): no write for that alone, and an update for another reason keeps
// it. A different tierName is rewritten.
func TestDiffKeepsTakenOverTierName(t *testing.T) {
	named := func(h *topologyv1alpha1.HyperNode, tierName string) *topologyv1alpha1.HyperNode {
		h.Spec.TierName = tierName
		return h
	}
	existing := []*topologyv1alpha1.HyperNode{named(hn("r1", 1, "n1"), "volcano.sh/tor")}
	assert.Empty(t, hypernode.Diff([]*topologyv1alpha1.HyperNode{named(hn("r1", 1, "n1"), "tor")}, existing))

	evs := hypernode.Diff([]*topologyv1alpha1.HyperNode{named(hn("r1", 1, "n1", "n2"), "tor")}, existing)
	require.Len(t, evs, 1)
	assert.Equal(t, "volcano.sh/tor", evs[0].HyperNode.Spec.TierName)

	evs = hypernode.Diff([]*topologyv1alpha1.HyperNode{named(hn("r1", 1, "n1"), "rack")}, existing)
	require.Len(t, evs, 1)
	assert.Equal(t, "rack", evs[0].HyperNode.Spec.TierName)

	assert.True(t, hypernode.SameTierName("tor", "volcano.sh/tor"))
	assert.False(t, hypernode.SameTierName("example.com/tor", "volcano.sh/tor"))
	assert.False(t, hypernode.SameTierName("", ""))
}
