package domain

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// spill packs a gang that fits no single child of its domain: it fills the fewest child domains,
// best fit first, recursively down to the leaves, and returns the nodes of the chosen leaves (plus
// chosen nodes that sit directly in a HyperNode, outside its children) and the leaves' names. It
// returns nil when the domain needs no spilling (it is a leaf, or one child holds the whole gang's
// remainder) or the choice cannot be trusted (rooms counted twice through overlapping memberships);
// the caller then keeps the whole domain.
//
// At each level: the children already holding the gang's placed pods are used first (they add no
// domain); then, while no single child holds what is left, the roomiest child is taken whole; the
// last share goes to the child that holds it with the least room left over. Taking the roomiest
// first gives the fewest children; best fit for the last keeps big children free for big gangs.
type spill struct {
	t        topology.Tree
	rooms    []int64                 // per HyperNode index (the root last)
	slots    func(node string) int64 // pods of the gang's shape the node holds
	eachNode func(fn func(string))   // every node of the snapshot
	used     map[*topology.HyperNode]bool
	nodes    sets.Set[string]
	leaves   []string
}

// group is a child domain of a HyperNode, or the nodes directly in it (outside every child).
type group struct {
	h     *topology.HyperNode // nil for the direct nodes
	nodes []string            // direct nodes only
	room  int64
	used  bool
}

func (g group) name() string {
	if g.h == nil {
		return ""
	}
	return g.h.Name
}

func newSpill(t topology.Tree, rooms []int64, slots func(string) int64, eachNode func(func(string)), placed []string) *spill {
	s := &spill{t: t, rooms: rooms, slots: slots, eachNode: eachNode, used: map[*topology.HyperNode]bool{}, nodes: sets.New[string]()}
	for _, n := range placed {
		for _, h := range t.Containers(n) {
			s.used[h] = true
		}
	}
	return s
}

// plan fills domain h with need pods; false when h needs no spilling.
func (s *spill) plan(h *topology.HyperNode, need int64) bool {
	groups := s.groups(h)
	if len(groups) <= 1 {
		return false
	}
	for _, g := range groups {
		if g.room >= need && !g.used && !s.anyUsed(groups) {
			return false // one child holds it all: the domain would have been that child
		}
	}
	if !s.fill(groups, need) {
		return false
	}
	// Trust the choice only if the distinct nodes really have the room (a node selected by two
	// leaves is counted in both).
	var room int64
	for n := range s.nodes {
		room += s.slots(n)
	}
	return room >= need
}

func (s *spill) anyUsed(groups []group) bool {
	for _, g := range groups {
		if g.used {
			return true
		}
	}
	return false
}

// groups lists h's children with room, and the nodes directly in h (outside every child) as one more
// group.
func (s *spill) groups(h *topology.HyperNode) []group {
	var out []group
	for _, c := range h.Children {
		if r := s.rooms[c.Index]; r > 0 {
			out = append(out, group{h: c, room: r, used: s.used[c]})
		}
	}
	direct := group{}
	inChild := func(n string) bool {
		for _, c := range s.t.Containers(n) {
			if c.Parent == h {
				return true
			}
		}
		return false
	}
	if h.IsRoot() {
		s.eachNode(func(n string) {
			if len(s.t.Containers(n)) == 0 {
				if r := s.slots(n); r > 0 {
					direct.nodes = append(direct.nodes, n)
					direct.room += r
				}
			}
		})
	} else {
		h.EachNode(func(n string) {
			if !inChild(n) {
				if r := s.slots(n); r > 0 {
					direct.nodes = append(direct.nodes, n)
					direct.room += r
				}
			}
		})
	}
	if direct.room > 0 {
		sort.Strings(direct.nodes)
		out = append(out, direct)
	}
	return out
}

// fill takes groups for need pods (see spill) and descends into each taken child.
func (s *spill) fill(groups []group, need int64) bool {
	// Used groups first (roomiest first), then by room descending; ties by name.
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].used != groups[j].used {
			return groups[i].used
		}
		if groups[i].room != groups[j].room {
			return groups[i].room > groups[j].room
		}
		return groups[i].name() < groups[j].name()
	})
	left := need
	taken := make([]bool, len(groups))
	for left > 0 {
		pick := -1
		// A used group with room is always taken next.
		for i, g := range groups {
			if !taken[i] && g.used {
				pick = i
				break
			}
		}
		if pick < 0 {
			// Best fit for the rest, if one group holds it; else the roomiest.
			for i, g := range groups {
				if !taken[i] && g.room >= left && (pick < 0 || g.room < groups[pick].room) {
					pick = i
				}
			}
		}
		if pick < 0 {
			for i := range groups {
				if !taken[i] {
					pick = i
					break
				}
			}
		}
		if pick < 0 {
			return false // not enough room below this HyperNode
		}
		taken[pick] = true
		g := groups[pick]
		share := min(g.room, left)
		left -= share
		if g.h == nil {
			s.takeDirect(g.nodes, share)
			continue
		}
		if sub := s.groups(g.h); len(sub) > 0 && len(g.h.Children) > 0 {
			if !s.fill(sub, share) {
				return false
			}
			continue
		}
		s.leaves = append(s.leaves, g.h.Name)
		g.h.EachNode(func(n string) { s.nodes.Insert(n) })
	}
	return true
}

// takeDirect takes direct nodes for share pods, roomiest first.
func (s *spill) takeDirect(nodes []string, share int64) {
	sort.SliceStable(nodes, func(i, j int) bool { return s.slots(nodes[i]) > s.slots(nodes[j]) })
	for _, n := range nodes {
		if share <= 0 {
			break
		}
		s.nodes.Insert(n)
		share -= s.slots(n)
	}
}
