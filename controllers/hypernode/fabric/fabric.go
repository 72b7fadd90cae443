// Package fabric turns an InfiniBand fabric (switches, hosts and the links between them, as read
// from ibnetdiscover output or UFM) into HyperNode groups: leaf, spine and core tiers.
//
// Tiers: a switch linked to a host is a leaf (tier 1); any other switch's tier is one more than its
// distance to the nearest leaf. Leaves that share a host (a rail-optimised scalable unit, where each
// host's HCAs land on several rail leaves) form one tier-1 group. At each tier above, switches that
// reach a common group of the tier below are joined into one group, so every group has exactly one
// parent and the result is a forest. Separate fabrics (switches not cabled to each other, say a
// compute and a management fabric) are tiered apart, a host cabled into both is a member in one,
// and a host-less switch that hangs off a single group is no tier above it (Graph.Groups).
package fabric

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
)

// Kind is a device's kind.
type Kind int

// Device kinds.
const (
	Switch Kind = iota
	Host
)

// Device is a switch or a host. A host with several HCAs is one device (keyed by its host name)
// whose Aliases are the HCAs' GUIDs.
type Device struct {
	GUID string
	Kind Kind
	// Name is the switch's description or the host's name.
	Name string
	// Aliases are further GUIDs of the device (a host's HCAs).
	Aliases []string
}

// Graph is a fabric.
type Graph struct {
	Devices map[string]*Device
	// Skipped counts the entries of the input that were left out, by reason (e.g. SHARP
	// aggregation nodes, unconfigured HCAs, links to unknown GUIDs), for the provider's log.
	Skipped map[string]int
	adj     map[string]map[string]bool
}

// NewGraph returns an empty fabric.
func NewGraph() *Graph {
	return &Graph{Devices: map[string]*Device{}, Skipped: map[string]int{}, adj: map[string]map[string]bool{}}
}

// NormalizeGUID renders a GUID as 16 lower-case hex digits without 0x.
func NormalizeGUID(s string) (string, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "0x")
	if t == "" || len(t) > 16 {
		return "", fmt.Errorf("GUID %q is not a 64-bit hex number", s)
	}
	if _, err := strconv.ParseUint(t, 16, 64); err != nil {
		return "", fmt.Errorf("GUID %q is not a 64-bit hex number", s)
	}
	return strings.Repeat("0", 16-len(t)) + t, nil
}

// Add records a device; a second Add of the same GUID keeps the first kind and fills a missing name.
func (g *Graph) Add(guid string, kind Kind, name string) {
	if d, ok := g.Devices[guid]; ok {
		if d.Name == "" {
			d.Name = name
		}
		return
	}
	g.Devices[guid] = &Device{GUID: guid, Kind: kind, Name: name}
}

// Link records a cable between two devices (both must have been added).
func (g *Graph) Link(a, b string) {
	if a == b {
		return
	}
	for _, p := range [][2]string{{a, b}, {b, a}} {
		m := g.adj[p[0]]
		if m == nil {
			m = map[string]bool{}
			g.adj[p[0]] = m
		}
		m[p[1]] = true
	}
}

// IsLeaf reports whether guid is a switch cabled to a host.
func (g *Graph) IsLeaf(guid string) bool {
	if d := g.Devices[guid]; d == nil || d.Kind != Switch {
		return false
	}
	for peer := range g.adj[guid] {
		if p := g.Devices[peer]; p != nil && p.Kind == Host {
			return true
		}
	}
	return false
}

// Stats counts a fabric's devices and links.
type Stats struct{ Switches, Hosts, Links int }

// Stats counts the graph.
func (g *Graph) Stats() Stats {
	var s Stats
	for _, d := range g.Devices {
		if d.Kind == Switch {
			s.Switches++
		} else {
			s.Hosts++
		}
	}
	for _, m := range g.adj {
		s.Links += len(m)
	}
	s.Links /= 2
	return s
}

// TierName is the tierName of tier t: leaf, spine, core, then tier<N>.
func TierName(t int) string {
	switch t {
	case 1:
		return "leaf"
	case 2:
		return "spine"
	case 3:
		return "core"
	}
	return "tier" + strconv.Itoa(t)
}

// Groups computes the tiers. nodeOf maps a host to its Kubernetes Node name; hosts without one are
// not members (their switches still shape the tiers). Group IDs and names derive from the lowest
// switch GUID of each group, so they do not change when a switch is renamed.
//
// Separate fabrics stay separate (docs/discovery.md, "Fabric tiers"):
//   - a fabric is a set of switches cabled to each other; each is tiered on its own;
//   - a host cabled into several fabrics (a compute node with an HCA on the management fabric) is a
//     member in one of them, its home (homes), and joins leaves only there;
//   - a switch of tier 3 or more cabled down to a single group of the tier below and to nothing
//     above it is no core: it is a leaf whose hosts are not in the capture (or a switch that adds
//     no domain). It is left out (deadEnds), and so is a switch that hangs only off it.
func (g *Graph) Groups(nodeOf func(*Device) (string, bool)) []hypernode.Group {
	fabricOf := g.fabrics()
	home := g.homes(fabricOf)
	tier, maxTier := g.tiers()
	all := map[string]bool{}
	for s := range tier {
		all[s] = true
	}
	unitOf, _ := g.group(tier, maxTier, all, fabricOf, home, nodeOf)
	kept := g.deadEnds(tier, maxTier, unitOf)
	_, out := g.group(tier, maxTier, kept, fabricOf, home, nodeOf)
	return out
}

// tiers are the switches' tiers: 1 for a switch cabled to a host, then one more than the distance to
// the nearest leaf, by breadth-first search over switch-to-switch cables.
func (g *Graph) tiers() (map[string]int, int) {
	tier := map[string]int{}
	var frontier []string
	for _, guid := range g.sortedGUIDs() {
		if g.IsLeaf(guid) {
			tier[guid] = 1
			frontier = append(frontier, guid)
		}
	}
	maxTier := 0
	if len(frontier) > 0 {
		maxTier = 1
	}
	for t := 2; len(frontier) > 0; t++ {
		var next []string
		for _, s := range frontier {
			for peer := range g.adj[s] {
				if p := g.Devices[peer]; p != nil && p.Kind == Switch {
					if _, seen := tier[peer]; !seen {
						tier[peer] = t
						next = append(next, peer)
					}
				}
			}
		}
		if len(next) > 0 {
			maxTier = t
		}
		sort.Strings(next)
		frontier = next
	}
	return tier, maxTier
}

// fabrics maps every switch to its fabric: the lowest GUID of the switches cabled to it, directly or
// through other switches. Hosts do not join fabrics: a host with HCAs in two fabrics is two ends of
// two networks, not a cable between them.
func (g *Graph) fabrics() map[string]string {
	uf := newUnionFind()
	for guid, d := range g.Devices {
		if d.Kind == Switch {
			uf.add(guid)
		}
	}
	for guid, d := range g.Devices {
		if d.Kind != Switch {
			continue
		}
		for peer := range g.adj[guid] {
			if p := g.Devices[peer]; p != nil && p.Kind == Switch {
				uf.union(guid, peer)
			}
		}
	}
	out := make(map[string]string, len(uf.parent))
	for guid := range uf.parent {
		out[guid] = uf.find(guid)
	}
	return out
}

// homes maps every host to the one fabric it is a member in: the fabric it is cabled to the most
// switches of (a compute node's 8 rails against its 1 management HCA), ties to the fabric with more
// switches, then to the lower fabric GUID.
func (g *Graph) homes(fabricOf map[string]string) map[string]string {
	size := map[string]int{}
	for _, f := range fabricOf {
		size[f]++
	}
	out := map[string]string{}
	for guid, d := range g.Devices {
		if d.Kind != Host {
			continue
		}
		cables := map[string]int{}
		for peer := range g.adj[guid] {
			if f, ok := fabricOf[peer]; ok {
				cables[f]++
			}
		}
		best := ""
		for f, n := range cables {
			if best == "" || n > cables[best] || (n == cables[best] && (size[f] > size[best] || (size[f] == size[best] && f < best))) {
				best = f
			}
		}
		if best != "" {
			out[guid] = best
		}
	}
	return out
}

// deadEnds returns the switches that are kept: all but those of tier 3 or more cabled down to at
// most one group of the tier below (unitOf) and up to no kept switch, decided from the top tier
// down so that a switch hanging only off a left-out one is left out too. Leaving such a switch out
// never splits a group: it joined only switches that reach that one group anyway.
func (g *Graph) deadEnds(tier map[string]int, maxTier int, unitOf map[string]string) map[string]bool {
	kept := make(map[string]bool, len(tier))
	for s := range tier {
		kept[s] = true
	}
	for t := maxTier; t >= 3; t-- {
		for s, st := range tier {
			if st != t {
				continue
			}
			lower := map[string]bool{}
			up := false
			for peer := range g.adj[s] {
				switch pt, ok := tier[peer]; {
				case !ok:
				case pt == t-1:
					lower[unitOf[peer]] = true
				case pt == t+1 && kept[peer]:
					up = true
				}
			}
			if len(lower) <= 1 && !up {
				kept[s] = false
			}
		}
	}
	return kept
}

// group joins, tier by tier, the switches in use that reach a common host at home in their fabric
// (tier 1) or a common group below, and returns each switch's group root and the groups.
func (g *Graph) group(tier map[string]int, maxTier int, use map[string]bool, fabricOf, home map[string]string, nodeOf func(*Device) (string, bool)) (map[string]string, []hypernode.Group) {
	// unitOf maps a switch to its group's root GUID at its tier.
	unitOf := map[string]string{}
	var out []hypernode.Group
	below := func(s string, t int) []string {
		var keys []string
		for peer := range g.adj[s] {
			p := g.Devices[peer]
			if p == nil {
				continue
			}
			switch {
			case t == 1 && p.Kind == Host && home[peer] == fabricOf[s]:
				keys = append(keys, peer)
			case t > 1 && p.Kind == Switch && tier[peer] == t-1 && use[peer]:
				keys = append(keys, groupID(t-1, unitOf[peer]))
			}
		}
		sort.Strings(keys)
		return keys
	}
	for t := 1; t <= maxTier; t++ {
		uf := newUnionFind()
		var switches []string
		for guid, st := range tier {
			if st == t && use[guid] {
				switches = append(switches, guid)
				uf.add(guid)
			}
		}
		sort.Strings(switches)
		// Join switches that reach a common host (t = 1) or a common group below (t > 1).
		reach := map[string]string{} // host or lower group → first switch seen
		for _, s := range switches {
			for _, key := range below(s, t) {
				if first, ok := reach[key]; ok {
					uf.union(first, s)
				} else {
					reach[key] = s
				}
			}
		}
		members := map[string]map[string]bool{}
		for _, s := range switches {
			root := uf.find(s)
			unitOf[s] = root
			if members[root] == nil {
				members[root] = map[string]bool{}
			}
			for _, key := range below(s, t) {
				members[root][key] = true
			}
		}
		roots := make([]string, 0, len(members))
		for r := range members {
			roots = append(roots, r)
		}
		sort.Strings(roots)
		for _, r := range roots {
			grp := hypernode.Group{ID: groupID(t, r), NameHint: TierName(t) + "-" + r, Tier: t, TierName: TierName(t)}
			keys := make([]string, 0, len(members[r]))
			for k := range members[r] {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if t == 1 {
					if n, ok := nodeOf(g.Devices[k]); ok {
						grp.Nodes = append(grp.Nodes, n)
					}
				} else {
					grp.Children = append(grp.Children, k)
				}
			}
			out = append(out, grp)
		}
	}
	return unitOf, out
}

func groupID(tier int, root string) string { return "tier" + strconv.Itoa(tier) + ":" + root }

func (g *Graph) sortedGUIDs() []string {
	out := make([]string, 0, len(g.Devices))
	for k := range g.Devices {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// unionFind joins switches; the root of a set is its lowest GUID, so names are stable.
type unionFind struct{ parent map[string]string }

func newUnionFind() *unionFind { return &unionFind{parent: map[string]string{}} }

func (u *unionFind) add(x string) { u.parent[x] = x }

func (u *unionFind) find(x string) string {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

func (u *unionFind) union(a, b string) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if ra < rb {
		u.parent[rb] = ra
	} else {
		u.parent[ra] = rb
	}
}
