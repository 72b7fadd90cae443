package topology

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

type member = topologyv1alpha1.MemberSpec

func exact(name string) member {
	return member{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

func regex(p string) member {
	return member{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{RegexMatch: &topologyv1alpha1.RegexMatch{Pattern: p}}}
}

func label(kv ...string) member {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return member{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{MatchLabels: m}}}
}

func labelExpr(key string, values ...string) member {
	return member{Type: topologyv1alpha1.MemberTypeNode, Selector: topologyv1alpha1.MemberSelector{LabelMatch: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}}}
}

func child(name string) member {
	return member{Type: topologyv1alpha1.MemberTypeHyperNode, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

func hn(name string, tier int, members ...member) *topologyv1alpha1.HyperNode {
	return &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, Members: members}}
}

func named(h *topologyv1alpha1.HyperNode, tierName string) *topologyv1alpha1.HyperNode {
	h.Spec.TierName = tierName
	return h
}

func node(name string, kv ...string) *corev1.Node {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// describe renders the resolved tree: "name(tier)<parent:[nodes]" per HyperNode.
func describe(t Tree) map[string]string {
	out := map[string]string{}
	for _, h := range t.List() {
		out[h.Name] = fmt.Sprintf("%d<%s:%s", h.Tier, h.Parent.Name, strings.Join(h.NodeNames(), ","))
	}
	return out
}

func TestTreeResolution(t *testing.T) {
	tests := []struct {
		name    string
		hns     []*topologyv1alpha1.HyperNode
		nodes   []*corev1.Node
		want    map[string]string // describe() output
		invalid string            // substring of the NotReady reason
		root    int               // root tier
	}{
		{
			name: "three tiers with exact, regex and label members",
			hns: []*topologyv1alpha1.HyperNode{
				hn("s0", 1, exact("n0"), exact("n1")),
				hn("s1", 1, regex("^n[23]$")),
				hn("s2", 1, label("rack", "r2")),
				hn("s3", 2, child("s0"), child("s1")),
				hn("s4", 2, child("s2")),
				hn("s5", 3, child("s3"), child("s4")),
			},
			nodes: []*corev1.Node{node("n0"), node("n1"), node("n2"), node("n3"), node("n4", "rack", "r2"), node("n5", "rack", "r2"), node("n6", "rack", "r3")},
			want: map[string]string{
				"s0": "1<s3:n0,n1", "s1": "1<s3:n2,n3", "s2": "1<s4:n4,n5",
				"s3": "2<s5:n0,n1,n2,n3", "s4": "2<s5:n4,n5", "s5": "3<" + RootName + ":n0,n1,n2,n3,n4,n5",
			},
			root: 4,
		},
		{
			name: "mixed depths: a tier-1 HyperNode directly under tier 3, nodes directly in tier 2",
			hns: []*topologyv1alpha1.HyperNode{
				hn("leaf", 1, exact("a")),
				hn("mid", 2, exact("b"), child("leaf")),
				hn("lone", 1, exact("c")),
				hn("top", 3, child("mid"), child("lone")),
				hn("island", 2, exact("d")),
			},
			nodes: []*corev1.Node{node("a"), node("b"), node("c"), node("d")},
			want: map[string]string{
				"leaf": "1<mid:a", "mid": "2<top:a,b", "lone": "1<top:c", "top": "3<" + RootName + ":a,b,c",
				"island": "2<" + RootName + ":d",
			},
			root: 4,
		},
		{
			name: "unanchored regex, expression label selector, empty selector selects nothing, missing exact node ignored",
			hns: []*topologyv1alpha1.HyperNode{
				hn("r", 1, regex("gpu")),
				hn("e", 1, labelExpr("zone", "z1", "z2")),
				hn("empty", 1, label(), exact("ghost")),
			},
			nodes: []*corev1.Node{node("x-gpu-1"), node("gpu2"), node("cpu", "zone", "z2"), node("other", "zone", "z9")},
			want: map[string]string{
				"r": "1<" + RootName + ":gpu2,x-gpu-1", "e": "1<" + RootName + ":cpu", "empty": "1<" + RootName + ":",
			},
			root: 2,
		},
		{
			name: "invalid regex selects nothing but the tree stays valid",
			hns:  []*topologyv1alpha1.HyperNode{hn("bad", 1, regex("(")), hn("ok", 1, exact("n"))},
			nodes: []*corev1.Node{
				node("n"),
			},
			want: map[string]string{"bad": "1<" + RootName + ":", "ok": "1<" + RootName + ":n"},
			root: 2,
		},
		{
			name:    "two parents make the tree invalid",
			hns:     []*topologyv1alpha1.HyperNode{hn("leaf", 1, exact("n")), hn("p1", 2, child("leaf")), hn("p2", 2, child("leaf"))},
			nodes:   []*corev1.Node{node("n")},
			invalid: "HyperNode leaf has two parents, p1 and p2",
		},
		{
			name:    "a cycle makes the tree invalid",
			hns:     []*topologyv1alpha1.HyperNode{hn("a", 1, child("c")), hn("b", 2, child("a")), hn("c", 3, child("b"))},
			invalid: "cycle: ",
		},
		{
			name:    "a self member is a cycle",
			hns:     []*topologyv1alpha1.HyperNode{hn("a", 1, child("a"))},
			invalid: "HyperNode a is a member of itself",
		},
		{
			name: "a dangling HyperNode member is ignored",
			hns:  []*topologyv1alpha1.HyperNode{hn("p", 2, child("nope"), exact("n"))},
			nodes: []*corev1.Node{
				node("n"),
			},
			want: map[string]string{"p": "2<" + RootName + ":n"},
			root: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Apply in both orders (HyperNodes first, nodes first): the result must not depend on it.
			for _, nodesFirst := range []bool{false, true} {
				c := NewCache()
				if nodesFirst {
					for _, n := range tc.nodes {
						c.AddOrUpdateNode(n)
					}
				}
				for _, h := range tc.hns {
					c.AddOrUpdateHyperNode(h)
				}
				if !nodesFirst {
					for _, n := range tc.nodes {
						c.AddOrUpdateNode(n)
					}
				}
				c.Read(func(tr Tree) {
					ready, reason := tr.Ready()
					if tc.invalid != "" {
						if ready || !strings.Contains(reason, tc.invalid) {
							t.Fatalf("nodesFirst=%v: ready=%v reason=%q, want NotReady containing %q", nodesFirst, ready, reason, tc.invalid)
						}
						return
					}
					if !ready {
						t.Fatalf("nodesFirst=%v: not ready: %s", nodesFirst, reason)
					}
					if got := describe(tr); !reflect.DeepEqual(got, tc.want) {
						t.Errorf("nodesFirst=%v: tree\n got %v\nwant %v", nodesFirst, got, tc.want)
					}
					if tr.Root().Tier != tc.root {
						t.Errorf("root tier %d, want %d", tr.Root().Tier, tc.root)
					}
				})
			}
		})
	}
}

func TestTierNamesAndLCA(t *testing.T) {
	c := NewCache()
	for _, h := range []*topologyv1alpha1.HyperNode{
		named(hn("s0", 1, exact("n0"), exact("n1")), "rack"),
		named(hn("s1", 1, exact("n2")), "rack"),
		named(hn("s2", 1, exact("n3")), "rack"),
		named(hn("p0", 2, child("s0"), child("s1")), "spine"),
		named(hn("p1", 2, child("s2")), "spine"),
	} {
		c.AddOrUpdateHyperNode(h)
	}
	for _, n := range []string{"n0", "n1", "n2", "n3", "outside"} {
		c.AddOrUpdateNode(node(n))
	}
	c.Read(func(tr Tree) {
		if !tr.HasTierName("spine") || !tr.HasTierName("rack") {
			t.Errorf("HasTierName(spine/rack) = false")
		}
		if tr.HasTierName("pod") {
			t.Errorf("HasTierName(pod) = true")
		}
		lca := func(nodes ...string) string { return tr.LCA(nodes).Name }
		for _, tc := range []struct {
			nodes []string
			want  string
		}{
			{[]string{"n0"}, "s0"},
			{[]string{"n0", "n1"}, "s0"},
			{[]string{"n0", "n2"}, "p0"},
			{[]string{"n0", "n3"}, RootName},
			{[]string{"n0", "outside"}, RootName},
			{[]string{"outside"}, RootName},
		} {
			if got := lca(tc.nodes...); got != tc.want {
				t.Errorf("LCA(%v) = %s, want %s", tc.nodes, got, tc.want)
			}
		}
		if tr.LCA(nil) != nil {
			t.Errorf("LCA(nil) != nil")
		}
		got := []string{}
		for _, h := range tr.Containers("n2") {
			got = append(got, h.Name)
		}
		if !reflect.DeepEqual(got, []string{"s1", "p0"}) {
			t.Errorf("Containers(n2) = %v", got)
		}
		if a := tr.AncestorAtTier(tr.Get("s2"), 2); a == nil || a.Name != "p1" {
			t.Errorf("AncestorAtTier(s2, 2) = %v", a)
		}
		if !tr.Get("p0").Contains(tr.Get("s1")) || tr.Get("p1").Contains(tr.Get("s1")) || !tr.Root().Contains(tr.Get("s1")) {
			t.Errorf("Contains is wrong")
		}
	})
}

func TestIncrementalUpdates(t *testing.T) {
	c := NewCache()
	c.AddOrUpdateHyperNode(hn("rack-a", 1, label("rack", "a")))
	c.AddOrUpdateHyperNode(hn("rack-b", 1, regex("^b-")))
	c.AddOrUpdateHyperNode(hn("spine", 2, child("rack-a"), child("rack-b")))
	c.AddOrUpdateNode(node("a-1", "rack", "a"))
	c.AddOrUpdateNode(node("b-1"))

	var gen int64
	check := func(step string, want map[string]string) {
		t.Helper()
		c.Read(func(tr Tree) {
			if ok, why := tr.Ready(); !ok {
				t.Fatalf("%s: not ready: %s", step, why)
			}
			if got := describe(tr); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n got %v\nwant %v", step, got, want)
			}
			if tr.Generation() == gen {
				t.Fatalf("%s: generation did not change", step)
			}
			gen = tr.Generation()
		})
	}
	check("initial", map[string]string{"rack-a": "1<spine:a-1", "rack-b": "1<spine:b-1", "spine": "2<" + RootName + ":a-1,b-1"})

	// A node joins through its labels, without a rebuild.
	c.AddOrUpdateNode(node("a-2", "rack", "a"))
	if c.dirty {
		t.Fatalf("a node event marked the structure dirty")
	}
	check("label join", map[string]string{"rack-a": "1<spine:a-1,a-2", "rack-b": "1<spine:b-1", "spine": "2<" + RootName + ":a-1,a-2,b-1"})

	// Relabelling moves it out; a status-only update (same labels) changes nothing.
	c.AddOrUpdateNode(node("a-2", "rack", "z"))
	check("label leave", map[string]string{"rack-a": "1<spine:a-1", "rack-b": "1<spine:b-1", "spine": "2<" + RootName + ":a-1,b-1"})
	c.AddOrUpdateNode(node("a-2", "rack", "z"))
	c.Read(func(tr Tree) {
		if tr.Generation() != gen {
			t.Fatalf("a no-op node update changed the generation")
		}
	})

	// Regex membership follows the name.
	c.AddOrUpdateNode(node("b-2"))
	check("regex join", map[string]string{"rack-a": "1<spine:a-1", "rack-b": "1<spine:b-1,b-2", "spine": "2<" + RootName + ":a-1,b-1,b-2"})

	c.DeleteNode("b-1")
	check("node delete", map[string]string{"rack-a": "1<spine:a-1", "rack-b": "1<spine:b-2", "spine": "2<" + RootName + ":a-1,b-2"})

	// A second parent makes the tree NotReady; deleting it makes it ready again.
	c.AddOrUpdateHyperNode(hn("spine-2", 2, child("rack-a")))
	c.Read(func(tr Tree) {
		if ok, why := tr.Ready(); ok || !strings.Contains(why, "two parents") {
			t.Fatalf("second parent: ready=%v %q", ok, why)
		}
	})
	c.AddOrUpdateNode(node("a-3", "rack", "a")) // node events while invalid are kept
	c.DeleteHyperNode("spine-2")
	check("second parent removed", map[string]string{"rack-a": "1<spine:a-1,a-3", "rack-b": "1<spine:b-2", "spine": "2<" + RootName + ":a-1,a-3,b-2"})

	// Deleting a leaf shrinks its parent; a status-only HyperNode update changes nothing.
	c.DeleteHyperNode("rack-b")
	check("leaf delete", map[string]string{"rack-a": "1<spine:a-1,a-3", "spine": "2<" + RootName + ":a-1,a-3"})
	same := hn("rack-a", 1, label("rack", "a"))
	same.Status.NodeCount = 2
	c.AddOrUpdateHyperNode(same)
	if c.dirty {
		t.Fatalf("a status-only HyperNode update marked the structure dirty")
	}
	// Changing a HyperNode's selector re-resolves it.
	c.AddOrUpdateHyperNode(hn("rack-a", 1, exact("b-2")))
	check("selector change", map[string]string{"rack-a": "1<spine:b-2", "spine": "2<" + RootName + ":b-2"})
}

// Random event sequences applied incrementally must give the same tree as a cache built from the
// final objects in one go.
func TestIncrementalMatchesFreshBuild(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	racks := []string{"r0", "r1", "r2", "r3"}
	specs := func(variant int) []*topologyv1alpha1.HyperNode {
		out := []*topologyv1alpha1.HyperNode{
			hn("leaf-r0", 1, label("rack", "r0")),
			hn("leaf-r1", 1, regex("^r1-")),
			hn("leaf-r2", 1, labelExpr("rack", "r2")),
			hn("leaf-r3", 1, exact("r3-0"), exact("r3-1"), exact("r3-2")),
			hn("leaf-pool", 1, label("pool", "x")),
			hn("spine-0", 2, child("leaf-r0"), child("leaf-r1"), child("leaf-pool"), exact("r0-0")),
			hn("spine-1", 2, child("leaf-r2")),
			hn("top", 3, child("spine-0"), child("spine-1")),
		}
		if variant%2 == 1 {
			out[6] = hn("spine-1", 2, child("leaf-r2"), child("leaf-r3"))
		}
		if variant%3 == 2 {
			out = append(out[:2], out[3:]...) // drop leaf-r2
		}
		return out
	}
	for round := 0; round < 20; round++ {
		c := NewCache()
		hyper := map[string]*topologyv1alpha1.HyperNode{}
		nodes := map[string]*corev1.Node{}
		for step := 0; step < 200; step++ {
			switch r := rng.Intn(10); {
			case r < 6:
				rack := racks[rng.Intn(len(racks))]
				n := node(fmt.Sprintf("%s-%d", racks[rng.Intn(len(racks))], rng.Intn(4)), "rack", rack, "pool", []string{"x", "y"}[rng.Intn(2)])
				nodes[n.Name] = n
				c.AddOrUpdateNode(n)
			case r < 8:
				for name := range nodes {
					delete(nodes, name)
					c.DeleteNode(name)
					break
				}
			case r < 9:
				all := specs(rng.Intn(6))
				h := all[rng.Intn(len(all))]
				hyper[h.Name] = h
				c.AddOrUpdateHyperNode(h)
			default:
				for name := range hyper {
					delete(hyper, name)
					c.DeleteHyperNode(name)
					break
				}
			}
			if rng.Intn(5) == 0 {
				// Reading rebuilds after HyperNode events; node events in between are incremental.
				compare(t, fmt.Sprintf("round %d step %d", round, step), c, hyper, nodes)
			}
		}
		compare(t, fmt.Sprintf("round %d end", round), c, hyper, nodes)
	}
}

func compare(t *testing.T, where string, c *Cache, hyper map[string]*topologyv1alpha1.HyperNode, nodes map[string]*corev1.Node) {
	t.Helper()
	fresh := NewCache()
	for _, h := range hyper {
		fresh.AddOrUpdateHyperNode(h)
	}
	for _, n := range nodes {
		fresh.AddOrUpdateNode(n)
	}
	var got, want string
	c.Read(func(tr Tree) { got = snapshot(tr, nodes) })
	fresh.Read(func(tr Tree) { want = snapshot(tr, nodes) })
	if got != want {
		t.Fatalf("%s: incremental tree differs from a fresh build\n got %s\nwant %s", where, got, want)
	}
}

func snapshot(tr Tree, nodes map[string]*corev1.Node) string {
	ok, why := tr.Ready()
	var b strings.Builder
	fmt.Fprintf(&b, "ready=%v %s\n", ok, why)
	if !ok {
		return b.String()
	}
	d := describe(tr)
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, d[k])
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var cs []string
		for _, h := range tr.Containers(n) {
			cs = append(cs, h.Name)
		}
		fmt.Fprintf(&b, "%s in %v\n", n, cs)
	}
	return b.String()
}

func TestAnchoredAtStart(t *testing.T) {
	for p, want := range map[string]bool{"^a-": true, "^(a|b)": true, "a-": false, "^a|b": false, "(^a)": true, "\\Aa": true} {
		if got := anchoredAtStart(p); got != want {
			t.Errorf("anchoredAtStart(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestNotReadyUntilSynced(t *testing.T) {
	c := NewCache()
	synced := false
	c.SetSynced(func() bool { return synced })
	c.Read(func(tr Tree) {
		if ok, _ := tr.Ready(); ok {
			t.Fatalf("ready before sync")
		}
	})
	synced = true
	c.Read(func(tr Tree) {
		if ok, why := tr.Ready(); !ok {
			t.Fatalf("not ready after sync: %s", why)
		}
	})
}

// TestReadRechecksDirtyAfterRebuild changes the tree between Read's rebuild and its callback: the
// callback must see the structure of the generation it reports, not the one rebuilt before it.
func TestReadRechecksDirtyAfterRebuild(t *testing.T) {
	c := NewCache()
	c.AddOrUpdateNode(node("n1"))
	c.AddOrUpdateNode(node("n2"))
	c.AddOrUpdateHyperNode(hn("a", 1, exact("n1")))
	once := false
	c.afterRebuild = func() {
		if !once {
			once = true
			c.AddOrUpdateHyperNode(hn("b", 1, exact("n2"))) // a handler slipping into the window
		}
	}
	c.Read(func(tr Tree) {
		if tr.Get("b") == nil {
			t.Fatalf("generation %d reported without HyperNode b: fn ran on the stale structure", tr.Generation())
		}
		if got := tr.Len(); got != 2 {
			t.Fatalf("Len = %d, want 2", got)
		}
	})
	if !once {
		t.Fatal("hook did not run")
	}
}

// A tierName written as a whole label key (Volcano v1.15's label discovery: volcano.sh/tor) and one
// written as its last segment (hyperbatch's: tor) name the same tier, both ways; two different keys
// with the same last segment do not.
func TestTierNamesFullKeyAndShortForm(t *testing.T) {
	c := NewCache()
	c.AddOrUpdateHyperNode(named(hn("s0", 1, exact("n0")), "volcano.sh/tor"))
	c.AddOrUpdateHyperNode(named(hn("p0", 2, child("s0")), "spine"))
	c.AddOrUpdateNode(node("n0"))
	c.Read(func(tr Tree) {
		for name, want := range map[string]bool{
			"tor": true, "volcano.sh/tor": true, "spine": true, "example.com/spine": true,
			"example.com/tor": false, "to": false, "": false, "volcano.sh/": false,
		} {
			if got := tr.HasTierName(name); got != want {
				t.Errorf("HasTierName(%q) = %v, want %v", name, got, want)
			}
		}
		if !tr.Get("s0").NamedAs("tor") || !tr.Get("p0").NamedAs("example.com/spine") || tr.Get("s0").NamedAs("spine") {
			t.Errorf("NamedAs is wrong")
		}
	})
}
