// Package autosplit decides where the children of a HyperJob in splitPolicy mode auto go: which
// member clusters, and how many children each, so that every child fits whole inside one network
// domain (a HyperNode of the tier it may use) of its cluster. It is pure: the members' HyperNode
// trees and free accelerators per node come in, a Decision or a Refusal with the numbers comes out.
//
// The rules (docs/multicluster.md, "How `auto` decides"):
//
//   - Only Ready members are candidates, and not those left out for a reason of their own
//     (Member.LeftOut: the member serves no child's kind, or a taint keeps the children away); the
//     refusal names each with its reason.
//   - A child is Pods pods of PodDemand accelerators each. It fits in a domain whose nodes have
//     room for Pods such pods: Σ over the domain's nodes of ⌊free ÷ PodDemand⌋ ≥ Pods. The
//     cluster-wide sum of free accelerators is never used alone: 8 free GPUs on 8 nodes hold no
//     pod of 8.
//   - The domains of a child with tier T (1 = leaf) are the cluster's HyperNodes of tier T, each
//     with the nodes under it. T = 0 means no topology limit: the whole cluster is one domain. A
//     cluster without HyperNodes of tier T cannot host a child limited to T.
//   - Reservations (children decided earlier that the members' numbers do not show yet) take their
//     pod slots first, node by node, smallest sufficient node first, as a packing scheduler would.
//   - Fewest clusters first, at most MaxDomains: every set of 1, then 2, … clusters is tried; the
//     first size with a set that holds every child wins; among those sets, the one leaving the
//     fewest free accelerators in its clusters (best fit: large holes stay for large jobs), then
//     the names in order.
//   - Children are placed largest first, each into the domain with the least room that still
//     holds it (best-fit decreasing). With one kind of child this is exact: a set is chosen
//     whenever one exists. With children of different sizes it is a heuristic that never
//     over-commits a domain but may miss a packing that exists.
package autosplit

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// HyperNode is one node of a member's HyperNode tree. Tier 1 HyperNodes list Kubernetes nodes in
// Members; higher tiers list HyperNodes of lower tiers.
type HyperNode struct {
	Name    string
	Tier    int
	Members []string
}

// Member is one member cluster as the control plane sees it.
type Member struct {
	Name  string
	Ready bool
	// LeftOut, when set, is why a Ready member is no candidate (e.g. "serves no
	// batch.volcano.sh/v1alpha1 Job"); a refusal names it.
	LeftOut string
	// Free is each node's free accelerators of the requested type (allocatable minus requests of
	// pods not finished).
	Free       map[string]int64
	HyperNodes []HyperNode
}

// Group is a set of identical children: one replicatedJob's children.
type Group struct {
	Name string
	// Children is how many children the group has.
	Children int
	// Pods is the number of accelerator pods in one child; PodDemand what each needs.
	Pods      int
	PodDemand int64
	// Tier is the highest HyperNode tier a child may span (0: no limit).
	Tier int
}

// Reservation is a child decided earlier whose pods the members' numbers do not show yet.
type Reservation struct {
	Cluster   string
	Domain    string // "" when the child had no tier limit
	Pods      int
	PodDemand int64
}

// Request is what is to be decided.
type Request struct {
	Groups []Group
	// MaxDomains caps the number of clusters (0: no cap).
	MaxDomains   int
	Reservations []Reservation
}

// Placement is where the children of a group go in one cluster: domain → children.
type Placement struct {
	Cluster string
	Group   string
	Domains map[string]int
}

// Children is the number of children of the placement.
func (p Placement) Children() int {
	n := 0
	for _, c := range p.Domains {
		n += c
	}
	return n
}

// Decision is the chosen split: the clusters in order and the placements of every group.
type Decision struct {
	Clusters   []string
	Placements []Placement
}

// Refusal says why nothing fits, with the numbers per member.
type Refusal struct {
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// domain is one place a child may go, with its nodes' pod-slot room.
type domain struct {
	cluster, name string
	free          []int64 // per node
}

func (d *domain) slots(podDemand int64) int64 {
	var n int64
	for _, f := range d.free {
		n += f / podDemand
	}
	return n
}

// domains lists a member's domains of a tier, with the free accelerators of their nodes.
func domains(m *Member, tier int) []*domain {
	if tier == 0 {
		d := &domain{cluster: m.Name}
		for _, n := range sortedKeys(m.Free) {
			d.free = append(d.free, max(m.Free[n], 0))
		}
		return []*domain{d}
	}
	byName := map[string]*HyperNode{}
	for i := range m.HyperNodes {
		byName[m.HyperNodes[i].Name] = &m.HyperNodes[i]
	}
	var nodesOf func(h *HyperNode, seen map[string]bool) []string
	nodesOf = func(h *HyperNode, seen map[string]bool) []string {
		if seen[h.Name] {
			return nil // a cycle in a broken tree: counted once
		}
		seen[h.Name] = true
		if h.Tier <= 1 {
			return h.Members
		}
		var out []string
		for _, c := range h.Members {
			if ch, ok := byName[c]; ok && ch.Tier < h.Tier {
				out = append(out, nodesOf(ch, seen)...)
			}
		}
		return out
	}
	var out []*domain
	for i := range m.HyperNodes {
		h := &m.HyperNodes[i]
		if h.Tier != tier {
			continue
		}
		d := &domain{cluster: m.Name, name: h.Name}
		nodes := nodesOf(h, map[string]bool{})
		slices.Sort(nodes)
		for _, n := range slices.Compact(nodes) {
			d.free = append(d.free, max(m.Free[n], 0))
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *domain) int { return cmp.Compare(a.name, b.name) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Decide chooses the clusters and the children per cluster, or refuses with the numbers.
func Decide(members []Member, req Request) (*Decision, *Refusal) {
	if err := validate(req); err != nil {
		return nil, &Refusal{Message: err.Error()}
	}
	var ready []*Member
	var notReady []string
	for i := range members {
		switch {
		case !members[i].Ready:
			notReady = append(notReady, members[i].Name)
		case members[i].LeftOut == "":
			ready = append(ready, &members[i])
		}
	}
	slices.SortFunc(ready, func(a, b *Member) int { return cmp.Compare(a.Name, b.Name) })
	limit := len(ready)
	if req.MaxDomains > 0 {
		limit = min(limit, req.MaxDomains)
	}
	for k := 1; k <= limit; k++ {
		var best *Decision
		var bestLeft int64
		combinations(len(ready), k, func(idx []int) {
			set := make([]*Member, len(idx))
			for i, j := range idx {
				set[i] = ready[j]
			}
			d, left, ok := place(set, req)
			if ok && (best == nil || left < bestLeft) {
				best, bestLeft = d, left
			}
		})
		if best != nil {
			return best, nil
		}
	}
	return nil, &Refusal{Message: explain(members, ready, notReady, req, limit)}
}

func validate(req Request) error {
	if len(req.Groups) == 0 {
		return fmt.Errorf("nothing to place: no children")
	}
	for _, g := range req.Groups {
		if g.Children < 0 || g.Pods <= 0 || g.PodDemand <= 0 || g.Tier < 0 {
			return fmt.Errorf("replicatedJob %q: a child needs a positive number of pods (%d) with a positive accelerator demand (%d) and a tier ≥ 0 (%d)",
				g.Name, g.Pods, g.PodDemand, g.Tier)
		}
	}
	return nil
}

// combinations calls fn with every k-subset of 0..n-1 in lexicographic order.
func combinations(n, k int, fn func([]int)) {
	idx := make([]int, k)
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == k {
			fn(slices.Clone(idx))
			return
		}
		for i := start; i <= n-(k-depth); i++ {
			idx[depth] = i
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
}

// place tries to put every child on the clusters of set: reservations first, then the children
// largest first, best fit. It returns the decision, the free accelerators left in the set's
// domains, and whether every child (and every cluster of the set) got a place.
func place(set []*Member, req Request) (*Decision, int64, bool) {
	tiers := map[int]bool{}
	for _, g := range req.Groups {
		tiers[g.Tier] = true
	}
	doms := map[int][]*domain{}
	for _, m := range set {
		for t := range tiers {
			doms[t] = append(doms[t], domains(m, t)...)
		}
	}
	// Tiers overlap (a leaf lies inside its spine): one free counter per node, shared by every
	// domain of every tier that contains it.
	links := linkNodes(set, doms)
	byName := map[string]*Member{}
	for _, m := range set {
		byName[m.Name] = m
	}
	for _, r := range req.Reservations {
		m := byName[r.Cluster]
		if m == nil {
			continue
		}
		// A reservation whose domain is gone from the member's tree takes room anywhere in it
		// (its numbers are all there is).
		nodes := sortedKeys(m.Free)
		if r.Domain != "" {
			if ns := domainNodes(m, tierOf(m, r.Domain), r.Domain); len(ns) > 0 {
				nodes = ns
			}
		}
		links.takeNodes(r.Cluster, nodes, r.Pods, r.PodDemand)
	}
	groups := slices.Clone(req.Groups)
	slices.SortStableFunc(groups, func(a, b Group) int {
		return cmp.Compare(int64(b.Pods)*b.PodDemand, int64(a.Pods)*a.PodDemand)
	})
	placed := map[[2]string]map[string]int{} // (cluster, group) → domain → children
	used := map[string]bool{}
	for _, g := range groups {
		for c := 0; c < g.Children; c++ {
			var best *domain
			var bestSlots int64
			for _, d := range doms[g.Tier] {
				s := links.slots(d, g.PodDemand)
				if s >= int64(g.Pods) && (best == nil || s < bestSlots) {
					best, bestSlots = d, s
				}
			}
			if best == nil {
				return nil, 0, false
			}
			links.take(best, g.Pods, g.PodDemand)
			key := [2]string{best.cluster, g.Name}
			if placed[key] == nil {
				placed[key] = map[string]int{}
			}
			placed[key][best.name]++
			used[best.cluster] = true
		}
	}
	if len(used) != len(set) {
		return nil, 0, false // a smaller set holds it: that size was tried first
	}
	d := &Decision{}
	var left int64
	for _, m := range set {
		d.Clusters = append(d.Clusters, m.Name)
		left += links.clusterFree(m.Name)
		for _, g := range req.Groups {
			if p := placed[[2]string{m.Name, g.Name}]; p != nil {
				d.Placements = append(d.Placements, Placement{Cluster: m.Name, Group: g.Name, Domains: p})
			}
		}
	}
	return d, left, true
}

// tierOf is the tier of a member's HyperNode (0 when unknown).
func tierOf(m *Member, name string) int {
	for _, h := range m.HyperNodes {
		if h.Name == name {
			return h.Tier
		}
	}
	return 0
}

// nodeLinks keeps one free counter per node of a cluster, shared by every domain (of every tier)
// that contains it.
type nodeLinks struct {
	free  map[string]map[string]int64 // cluster → node → free
	nodes map[*domain][]string        // domain → its nodes
}

func linkNodes(set []*Member, doms map[int][]*domain) *nodeLinks {
	l := &nodeLinks{free: map[string]map[string]int64{}, nodes: map[*domain][]string{}}
	byName := map[string]*Member{}
	for _, m := range set {
		byName[m.Name] = m
		l.free[m.Name] = map[string]int64{}
		for n, f := range m.Free {
			l.free[m.Name][n] = max(f, 0)
		}
	}
	for t, ds := range doms {
		for _, d := range ds {
			l.nodes[d] = domainNodes(byName[d.cluster], t, d.name)
		}
	}
	return l
}

// domainNodes lists the nodes of a domain, in the order domains() reads them.
func domainNodes(m *Member, tier int, name string) []string {
	if tier == 0 {
		return sortedKeys(m.Free)
	}
	byName := map[string]*HyperNode{}
	for i := range m.HyperNodes {
		byName[m.HyperNodes[i].Name] = &m.HyperNodes[i]
	}
	seen := map[string]bool{}
	var rec func(h *HyperNode) []string
	rec = func(h *HyperNode) []string {
		if seen[h.Name] {
			return nil
		}
		seen[h.Name] = true
		if h.Tier <= 1 {
			return h.Members
		}
		var out []string
		for _, c := range h.Members {
			if ch, ok := byName[c]; ok && ch.Tier < h.Tier {
				out = append(out, rec(ch)...)
			}
		}
		return out
	}
	h := byName[name]
	if h == nil {
		return nil
	}
	nodes := rec(h)
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

func (l *nodeLinks) slots(d *domain, podDemand int64) int64 {
	var n int64
	for _, node := range l.nodes[d] {
		n += l.free[d.cluster][node] / podDemand
	}
	return n
}

// take places pods on the domain's nodes, smallest sufficient node first.
func (l *nodeLinks) take(d *domain, pods int, podDemand int64) bool {
	return l.takeNodes(d.cluster, l.nodes[d], pods, podDemand)
}

// takeNodes places pods on nodes of a cluster, smallest sufficient node first (as a packing
// scheduler would), and reports whether they all fit.
func (l *nodeLinks) takeNodes(cluster string, nodes []string, pods int, podDemand int64) bool {
	free := l.free[cluster]
	for ; pods > 0; pods-- {
		best := ""
		for _, node := range nodes {
			if f := free[node]; f >= podDemand && (best == "" || f < free[best]) {
				best = node
			}
		}
		if best == "" {
			return false
		}
		free[best] -= podDemand
	}
	return true
}

func (l *nodeLinks) clusterFree(cluster string) int64 {
	var n int64
	for _, f := range l.free[cluster] {
		n += f
	}
	return n
}

// explain is the refusal's message: per member, the free accelerators, the largest number of pods
// of each group one domain holds, and what it could host.
func explain(all []Member, ready []*Member, notReady []string, req Request, limit int) string {
	var b strings.Builder
	need := 0
	for _, g := range req.Groups {
		need += g.Children
	}
	fmt.Fprintf(&b, "no set of at most %d member clusters holds all %d children", limit, need)
	for _, g := range req.Groups {
		tier := "any domain"
		if g.Tier > 0 {
			tier = fmt.Sprintf("one tier-%d HyperNode", g.Tier)
		}
		fmt.Fprintf(&b, "; replicatedJob %s: %d children of %d pods × %d accelerators, each inside %s", g.Name, g.Children, g.Pods, g.PodDemand, tier)
	}
	for _, m := range ready {
		l := linkNodes([]*Member{m}, map[int][]*domain{})
		fmt.Fprintf(&b, "; %s: %d free", m.Name, l.clusterFree(m.Name))
		for _, g := range req.Groups {
			ds := domains(m, g.Tier)
			var largest, hold int64
			for _, d := range ds {
				s := d.slots(g.PodDemand)
				largest = max(largest, s)
				hold += s / int64(g.Pods)
			}
			fmt.Fprintf(&b, ", %s: %d domains, the largest holds %d of its pods, %d children in all", g.Name, len(ds), largest, hold)
		}
		if n := reservedOn(req.Reservations, m.Name); n > 0 {
			fmt.Fprintf(&b, " (before %d accelerators reserved for decided splits)", n)
		}
	}
	if len(notReady) > 0 {
		sort.Strings(notReady)
		fmt.Fprintf(&b, "; not Ready, not considered: %s", strings.Join(notReady, ", "))
	}
	if out := LeftOut(all); out != "" {
		fmt.Fprintf(&b, "; left out: %s", out)
	}
	if len(all) == 0 {
		b.WriteString("; no member clusters")
	}
	return b.String()
}

func reservedOn(rs []Reservation, cluster string) int64 {
	var n int64
	for _, r := range rs {
		if r.Cluster == cluster {
			n += int64(r.Pods) * r.PodDemand
		}
	}
	return n
}

// Reservations are the decision's children as reservations, for the decisions made after it until
// the members' numbers show its pods.
func (d *Decision) Reservations(req Request) []Reservation {
	groups := map[string]Group{}
	for _, g := range req.Groups {
		groups[g.Name] = g
	}
	var out []Reservation
	for _, p := range d.Placements {
		g := groups[p.Group]
		for _, dom := range sortedKeys(p.Domains) {
			for range p.Domains[dom] {
				out = append(out, Reservation{Cluster: p.Cluster, Domain: dom, Pods: g.Pods, PodDemand: g.PodDemand})
			}
		}
	}
	return out
}

// LeftOut names the Ready members left out with their reasons, by name: "m2 (serves no …); m3 (…)";
// "" when none is.
func LeftOut(members []Member) string {
	var parts []string
	for _, m := range members {
		if m.Ready && m.LeftOut != "" {
			parts = append(parts, fmt.Sprintf("%s (%s)", m.Name, m.LeftOut))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
