package autosplit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leaves builds a member whose tier-1 HyperNodes ("<name>-leaf<i>") hold nodes with the given free
// accelerators, under one tier-2 spine.
func leaves(name string, free ...[]int64) Member {
	m := Member{Name: name, Ready: true, Free: map[string]int64{}}
	spine := HyperNode{Name: name + "-spine", Tier: 2}
	for i, nodes := range free {
		leaf := HyperNode{Name: fmt.Sprintf("%s-leaf%d", name, i), Tier: 1}
		for j, f := range nodes {
			n := fmt.Sprintf("%s-n%d-%d", name, i, j)
			m.Free[n] = f
			leaf.Members = append(leaf.Members, n)
		}
		m.HyperNodes = append(m.HyperNodes, leaf)
		spine.Members = append(spine.Members, leaf.Name)
	}
	m.HyperNodes = append(m.HyperNodes, spine)
	return m
}

// A child of 2 pods × 4 GPUs that must stay in one leaf.
func oneLeafChildren(n int) Group {
	return Group{Name: "w", Children: n, Pods: 2, PodDemand: 4, Tier: 1}
}

func clustersOf(d *Decision) []string { return d.Clusters }

func childrenIn(d *Decision, cluster string) int {
	n := 0
	for _, p := range d.Placements {
		if p.Cluster == cluster {
			n += p.Children()
		}
	}
	return n
}

// The issue's cases.
func TestDecideIssueCases(t *testing.T) {
	// member1: 16 free GPUs over 4 leaves of one 4-GPU node each: no leaf holds 2 pods × 4.
	// member2: 8 free GPUs, in one leaf of two 4-GPU nodes.
	member1 := leaves("member1", []int64{4}, []int64{4}, []int64{4}, []int64{4})
	member2 := leaves("member2", []int64{4, 4})

	t.Run("more free GPUs but spread over leaves too small goes to the one with a whole leaf", func(t *testing.T) {
		d, r := Decide([]Member{member1, member2}, Request{Groups: []Group{oneLeafChildren(1)}, MaxDomains: 2})
		require.Nil(t, r)
		assert.Equal(t, []string{"member2"}, clustersOf(d))
		assert.Equal(t, map[string]int{"member2-leaf0": 1}, d.Placements[0].Domains)
	})
	t.Run("needs more than either has: split over both", func(t *testing.T) {
		a := leaves("member1", []int64{8, 8}, []int64{4})
		b := leaves("member2", []int64{4, 4, 4, 4})
		d, r := Decide([]Member{a, b}, Request{Groups: []Group{oneLeafChildren(4)}, MaxDomains: 2})
		require.Nil(t, r)
		assert.Equal(t, []string{"member1", "member2"}, clustersOf(d))
		assert.Equal(t, 2, childrenIn(d, "member1")) // 4 pods of 4 on two 8-GPU nodes
		assert.Equal(t, 2, childrenIn(d, "member2"))
	})
	t.Run("fits in one: stays in one", func(t *testing.T) {
		a := leaves("member1", []int64{8, 8})
		b := leaves("member2", []int64{8, 8, 8, 8})
		d, r := Decide([]Member{a, b}, Request{Groups: []Group{oneLeafChildren(2)}, MaxDomains: 2})
		require.Nil(t, r)
		assert.Equal(t, []string{"member1"}, clustersOf(d), "both fit; best fit keeps member2's larger room free")
		assert.Equal(t, 2, childrenIn(d, "member1"))
	})
	t.Run("fits nowhere: refused with the numbers", func(t *testing.T) {
		d, r := Decide([]Member{member1, member2}, Request{Groups: []Group{oneLeafChildren(3)}, MaxDomains: 2})
		require.Nil(t, d)
		require.NotNil(t, r)
		for _, want := range []string{"no set of at most 2 member clusters holds all 3 children",
			"3 children of 2 pods × 4 accelerators, each inside one tier-1 HyperNode",
			"member1: 16 free, w: 4 domains, the largest holds 1 of its pods, 0 children in all",
			"member2: 8 free, w: 1 domains, the largest holds 2 of its pods, 1 children in all"} {
			assert.Contains(t, r.Message, want)
		}
	})
	t.Run("maxDomains 1 refuses what two would hold", func(t *testing.T) {
		a := leaves("member1", []int64{8})
		b := leaves("member2", []int64{8})
		_, r := Decide([]Member{a, b}, Request{Groups: []Group{oneLeafChildren(2)}, MaxDomains: 1})
		require.NotNil(t, r)
		assert.Contains(t, r.Message, "at most 1 member clusters")
	})
	t.Run("a NotReady member gets nothing", func(t *testing.T) {
		a := leaves("member1", []int64{8, 8})
		a.Ready = false
		b := leaves("member2", []int64{8})
		d, r := Decide([]Member{a, b}, Request{Groups: []Group{oneLeafChildren(1)}})
		require.Nil(t, r)
		assert.Equal(t, []string{"member2"}, clustersOf(d))
		_, r = Decide([]Member{a, b}, Request{Groups: []Group{oneLeafChildren(3)}})
		require.NotNil(t, r)
		assert.Contains(t, r.Message, "not Ready, not considered: member1")
	})
	t.Run("no tier limit: the whole cluster is one domain", func(t *testing.T) {
		g := oneLeafChildren(1)
		g.Tier = 0
		d, r := Decide([]Member{member1}, Request{Groups: []Group{g}})
		require.Nil(t, r)
		assert.Equal(t, []string{"member1"}, clustersOf(d))
		g.Tier = 2 // the spine spans member1's four leaves
		d, r = Decide([]Member{member1}, Request{Groups: []Group{g}})
		require.Nil(t, r)
		assert.Equal(t, map[string]int{"member1-spine": 1}, d.Placements[0].Domains)
	})
	t.Run("a tier the member's tree lacks holds nothing", func(t *testing.T) {
		g := oneLeafChildren(1)
		g.Tier = 3
		_, r := Decide([]Member{member2}, Request{Groups: []Group{g}})
		require.NotNil(t, r)
		assert.Contains(t, r.Message, "w: 0 domains")
	})
	t.Run("bad request", func(t *testing.T) {
		_, r := Decide([]Member{member2}, Request{Groups: []Group{{Name: "x", Children: 1}}})
		require.NotNil(t, r)
		assert.Contains(t, r.Message, `replicatedJob "x"`)
	})
}

// Two HyperJobs decided together, each fitting alone but not both: the second sees the first's
// reservations and is refused, so no member is over-committed; once the first is gone it fits.
func TestReservationsPreventOverCommit(t *testing.T) {
	members := []Member{leaves("member1", []int64{8, 8}), leaves("member2", []int64{8})}
	req := Request{Groups: []Group{oneLeafChildren(3)}, MaxDomains: 2}
	first, r := Decide(members, req)
	require.Nil(t, r)
	assert.Equal(t, []string{"member1", "member2"}, first.Clusters)
	second := req
	second.Reservations = first.Reservations(req)
	require.Len(t, second.Reservations, 3)
	_, r = Decide(members, second)
	require.NotNil(t, r, "the second HyperJob must wait")
	assert.Contains(t, r.Message, "(before 16 accelerators reserved for decided splits)")
	again, r := Decide(members, req)
	require.Nil(t, r, "without the reservation it fits again")
	assert.Equal(t, first, again, "deterministic")

	// A reservation on a domain that no longer exists still takes room in its cluster.
	_, r = Decide(members[1:], Request{Groups: []Group{oneLeafChildren(1)},
		Reservations: []Reservation{{Cluster: "member2", Domain: "gone", Pods: 2, PodDemand: 4}}})
	require.NotNil(t, r)
}

// Tiers overlap: a child placed through a spine takes room from the leaf under it.
func TestTiersShareNodes(t *testing.T) {
	m := leaves("member1", []int64{8})
	spineChild := Group{Name: "s", Children: 1, Pods: 2, PodDemand: 4, Tier: 2}
	leafChild := Group{Name: "l", Children: 1, Pods: 2, PodDemand: 4, Tier: 1}
	_, r := Decide([]Member{m}, Request{Groups: []Group{spineChild, leafChild}})
	require.NotNil(t, r, "one 8-GPU node holds two pods of 4, not four")
	d, r := Decide([]Member{m}, Request{Groups: []Group{spineChild}})
	require.Nil(t, r)
	assert.Equal(t, 1, childrenIn(d, "member1"))
}

// bruteForce is the fewest clusters any assignment of the group's children to domains needs (0:
// none fits), trying every assignment. A domain holds n children when its nodes have room for
// n × Pods pods (exact for identical pods).
func bruteForce(members []Member, g Group, maxDomains int) int {
	var doms []*domain
	for i := range members {
		if members[i].Ready {
			doms = append(doms, domains(&members[i], g.Tier)...)
		}
	}
	best := 0
	count := make([]int, len(doms))
	var rec func(c int)
	rec = func(c int) {
		if c == g.Children {
			used := map[string]bool{}
			for i, d := range doms {
				if count[i] == 0 {
					continue
				}
				if d.slots(g.PodDemand) < int64(count[i]*g.Pods) {
					return
				}
				used[d.cluster] = true
			}
			if (maxDomains == 0 || len(used) <= maxDomains) && (best == 0 || len(used) < best) {
				best = len(used)
			}
			return
		}
		for i := range doms {
			count[i]++
			rec(c + 1)
			count[i]--
		}
	}
	rec(0)
	return best
}

func randomMember(rng *rand.Rand, name string) Member {
	var free [][]int64
	for range 1 + rng.IntN(3) {
		var nodes []int64
		for range 1 + rng.IntN(3) {
			nodes = append(nodes, int64(rng.IntN(9)))
		}
		free = append(free, nodes)
	}
	m := leaves(name, free...)
	m.Ready = rng.IntN(5) > 0
	return m
}

// On 3,000 random small instances with one kind of child, Decide finds a split exactly when one
// exists, with the fewest clusters any assignment needs, and never over-commits a domain.
func TestDecideMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 6))
	found, refused := 0, 0
	defer func() { t.Logf("%d instances split, %d refused (a split exists in neither)", found, refused) }()
	for i := range 3000 {
		members := []Member{randomMember(rng, "m0"), randomMember(rng, "m1"), randomMember(rng, "m2")}
		g := Group{Name: "g", Children: 1 + rng.IntN(4), Pods: 1 + rng.IntN(3), PodDemand: []int64{1, 2, 4}[rng.IntN(3)], Tier: rng.IntN(3)}
		maxDomains := rng.IntN(4)
		want := bruteForce(members, g, maxDomains)
		d, r := Decide(members, Request{Groups: []Group{g}, MaxDomains: maxDomains})
		desc := fmt.Sprintf("instance %d: %+v %+v maxDomains %d", i, members, g, maxDomains)
		if want == 0 {
			require.Nil(t, d, desc)
			require.NotNil(t, r, desc)
			refused++
			continue
		}
		found++
		require.Nil(t, r, desc)
		require.Len(t, d.Clusters, want, desc)
		checkDecision(t, members, []Group{g}, d, desc)
	}
}

// With two kinds of child, Decide is a heuristic: whatever it decides is valid.
func TestDecideMixedIsSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 6))
	decided := 0
	for i := range 2000 {
		members := []Member{randomMember(rng, "m0"), randomMember(rng, "m1"), randomMember(rng, "m2")}
		groups := []Group{
			{Name: "a", Children: 1 + rng.IntN(3), Pods: 1 + rng.IntN(2), PodDemand: []int64{1, 2, 4}[rng.IntN(3)], Tier: 1},
			{Name: "b", Children: 1 + rng.IntN(3), Pods: 1 + rng.IntN(2), PodDemand: []int64{1, 2, 4}[rng.IntN(3)], Tier: 1},
		}
		maxDomains := rng.IntN(4)
		d, r := Decide(members, Request{Groups: groups, MaxDomains: maxDomains})
		desc := fmt.Sprintf("instance %d: %+v %+v maxDomains %d", i, members, groups, maxDomains)
		if r != nil {
			require.Nil(t, d, desc)
			continue
		}
		decided++
		if maxDomains > 0 {
			require.LessOrEqual(t, len(d.Clusters), maxDomains, desc)
		}
		checkDecision(t, members, groups, d, desc)
	}
	t.Logf("%d of 2000 mixed instances decided", decided)
}

// checkDecision checks a decision on its own: every child placed, only Ready members, and, per
// node, no more pods than it has room for (pods assigned to nodes exactly, by trying every way for
// the small instances here).
func checkDecision(t *testing.T, members []Member, groups []Group, d *Decision, desc string) {
	t.Helper()
	byName := map[string]*Member{}
	for i := range members {
		byName[members[i].Name] = &members[i]
	}
	placed := map[string]int{}
	type pod struct {
		demand int64
		nodes  []string
	}
	perCluster := map[string][]pod{}
	for _, p := range d.Placements {
		m := byName[p.Cluster]
		require.NotNil(t, m, desc)
		require.True(t, m.Ready, desc)
		var g Group
		for _, gg := range groups {
			if gg.Name == p.Group {
				g = gg
			}
		}
		placed[p.Group] += p.Children()
		for dom, n := range p.Domains {
			nodes := domainNodes(m, g.Tier, dom)
			if g.Tier == 0 {
				nodes = sortedKeys(m.Free)
			}
			for range n * g.Pods {
				perCluster[p.Cluster] = append(perCluster[p.Cluster], pod{g.PodDemand, nodes})
			}
		}
	}
	for _, g := range groups {
		require.Equal(t, g.Children, placed[g.Name], desc)
	}
	for c, pods := range perCluster {
		free := map[string]int64{}
		for n, f := range byName[c].Free {
			free[n] = f
		}
		slices.SortFunc(pods, func(a, b pod) int { return int(b.demand - a.demand) })
		var fit func(i int) bool
		fit = func(i int) bool {
			if i == len(pods) {
				return true
			}
			for _, n := range pods[i].nodes {
				if free[n] >= pods[i].demand {
					free[n] -= pods[i].demand
					if fit(i + 1) {
						return true
					}
					free[n] += pods[i].demand
				}
			}
			return false
		}
		require.True(t, fit(0), "%s: the pods placed in %s do not fit its nodes", desc, c)
	}
	require.True(t, slices.IsSorted(d.Clusters) || len(d.Clusters) < 2, desc)
}

// A Ready member left out (it serves no child's kind) is no candidate, even where best fit would
// choose it, and a refusal names it with its reason (issue 38).
func TestLeftOutMembers(t *testing.T) {
	m1 := leaves("m1", []int64{8}, []int64{8}, []int64{8})
	m2 := leaves("m2", []int64{4, 4})
	req := Request{Groups: []Group{oneLeafChildren(1)}, MaxDomains: 1}
	d, ref := Decide([]Member{m1, m2}, req)
	require.Nil(t, ref)
	assert.Equal(t, []string{"m2"}, clustersOf(d), "best fit: m2's leaf holds the child exactly")

	m2.LeftOut = "serves no batch.volcano.sh/v1alpha1 Job"
	d, ref = Decide([]Member{m1, m2}, req)
	require.Nil(t, ref)
	assert.Equal(t, []string{"m1"}, clustersOf(d))
	assert.Equal(t, "m2 (serves no batch.volcano.sh/v1alpha1 Job)", LeftOut([]Member{m1, m2}))

	_, ref = Decide([]Member{m2}, req)
	require.NotNil(t, ref)
	assert.Contains(t, ref.Message, "no set of at most 0 member clusters holds all 1 children")
	assert.Contains(t, ref.Message, "; left out: m2 (serves no batch.volcano.sh/v1alpha1 Job)")
}
