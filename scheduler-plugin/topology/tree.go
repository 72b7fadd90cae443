package topology

import (
	"sort"
	"strings"
)

// HyperNode is one resolved HyperNode (or the virtual root). Values handed out by a Tree are valid
// only inside the Read callback that produced them.
type HyperNode struct {
	Name     string
	Tier     int
	TierName string
	// Parent is the enclosing HyperNode; the root's children have the root as parent; the root has none.
	Parent   *HyperNode
	Children []*HyperNode
	// Index is dense in [0, Tree.Len()]: real HyperNodes by (tier, name), then the root.
	Index int

	root  bool
	nodes map[string]int32 // flattened node members → number of membership paths
}

// NamedAs reports whether h's tierName is name (see TierNamesMatch).
func (h *HyperNode) NamedAs(name string) bool { return TierNamesMatch(h.TierName, name) }

// TierNamesMatch reports whether two tierNames name the same tier. A tierName is either a short name
// (tor) or a whole label key (volcano.sh/tor): Volcano v1.15's label discovery writes the key,
// hyperbatch's writes the key's last segment, and a PodGroup may use either. Equal names match,
// and a short name matches a key whose last segment it is; two keys match only when equal.
func TierNamesMatch(a, b string) bool {
	if a == b {
		return a != ""
	}
	ia, ib := strings.LastIndexByte(a, '/'), strings.LastIndexByte(b, '/')
	switch {
	case ia < 0 && ib >= 0:
		return a == b[ib+1:]
	case ib < 0 && ia >= 0:
		return b == a[ia+1:]
	}
	return false
}

// IsRoot reports whether h is the virtual cluster root.
func (h *HyperNode) IsRoot() bool { return h.root }

// HasNode reports whether the node is inside h. The root contains every node.
func (h *HyperNode) HasNode(node string) bool {
	if h.root {
		return true
	}
	_, ok := h.nodes[node]
	return ok
}

// NodeCount is the number of nodes inside h (0 for the root, which holds every node).
func (h *HyperNode) NodeCount() int { return len(h.nodes) }

// NodeNames returns h's flattened node members, sorted. The root returns nil (every node).
func (h *HyperNode) NodeNames() []string {
	if h.root {
		return nil
	}
	out := make([]string, 0, len(h.nodes))
	for n := range h.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// EachNode calls fn for every node inside h (not for the root).
func (h *HyperNode) EachNode(fn func(node string)) {
	for n := range h.nodes {
		fn(n)
	}
}

// Contains reports whether other is h or below h.
func (h *HyperNode) Contains(other *HyperNode) bool {
	for a := other; a != nil; a = a.Parent {
		if a == h {
			return true
		}
	}
	return false
}

// Tree is a consistent read-only view of the cache, valid inside Cache.Read.
type Tree struct{ c *Cache }

// Read runs fn with a consistent view of the tree, rebuilding the structure first if HyperNodes
// changed since the last read.
//
// The rebuild needs the write lock, and fn runs under the read lock. Between dropping the one and
// taking the other an event handler may change the tree again (bumping the generation and marking
// the structure dirty), so dirty is re-checked every time the read lock is taken: fn never sees a
// structure older than the generation it reports.
func (c *Cache) Read(fn func(t Tree)) {
	c.mu.RLock()
	for c.dirty {
		c.mu.RUnlock()
		c.mu.Lock()
		if c.dirty {
			c.rebuild()
		}
		c.mu.Unlock()
		if c.afterRebuild != nil {
			c.afterRebuild() // test hook: lets a test change the tree in the window
		}
		c.mu.RLock()
	}
	defer c.mu.RUnlock()
	fn(Tree{c})
}

// Generation changes whenever the tree (structure or memberships) changes.
func (t Tree) Generation() int64 { return t.c.generation }

// Ready reports whether the tree may be used for placement, and why not.
func (t Tree) Ready() (bool, string) {
	if t.c.synced != nil && !t.c.synced() {
		return false, "HyperNode and Node informers have not synced yet"
	}
	if t.c.invalid != "" {
		return false, t.c.invalid
	}
	return true, ""
}

// Synced reports whether the HyperNode and Node informers have delivered their initial lists (so
// KnowsNode is authoritative).
func (t Tree) Synced() bool { return t.c.synced == nil || t.c.synced() }

// Invalid is the reason the HyperNode objects do not form a valid tree ("" when they do).
func (t Tree) Invalid() string { return t.c.invalid }

// Warnings lists members that select nothing because they are malformed or dangling.
func (t Tree) Warnings() []string { return append([]string(nil), t.c.warnings...) }

// Len is the number of real HyperNodes.
func (t Tree) Len() int { return len(t.c.list) }

// Root is the virtual cluster root (tier = highest tier + 1).
func (t Tree) Root() *HyperNode { return t.c.root }

// Get returns a HyperNode by name (RootName gives the root), or nil.
func (t Tree) Get(name string) *HyperNode {
	if name == RootName {
		return t.c.root
	}
	return t.c.hns[name]
}

// List returns the real HyperNodes ordered by Index.
func (t Tree) List() []*HyperNode { return t.c.list }

// Tiers returns the distinct tiers of real HyperNodes, ascending.
func (t Tree) Tiers() []int { return t.c.tiers }

// AtTier returns the HyperNodes of one tier, by name.
func (t Tree) AtTier(tier int) []*HyperNode { return t.c.byTier[tier] }

// HasTierName reports whether some HyperNode declares the tierName (spec.tierName), in its full or
// short form (TierNamesMatch). Names are resolved per tree (see domain): the same name may sit at
// different tiers in different trees.
func (t Tree) HasTierName(name string) bool {
	if _, ok := t.c.tierNames[name]; ok {
		return name != ""
	}
	for tn := range t.c.tierNames {
		if TierNamesMatch(tn, name) {
			return true
		}
	}
	return false
}

// Containers returns the HyperNodes that contain the node, by ascending tier (the root excluded).
func (t Tree) Containers(node string) []*HyperNode { return t.c.containers[node] }

// KnowsNode reports whether the cache has seen the node.
func (t Tree) KnowsNode(node string) bool {
	_, ok := t.c.nodes[node]
	return ok
}

// LCA returns the lowest-tier HyperNode containing every given node: a real HyperNode when one
// exists, otherwise the root. It returns nil for an empty list.
func (t Tree) LCA(nodes []string) *HyperNode {
	if len(nodes) == 0 {
		return nil
	}
	for _, h := range t.c.containers[nodes[0]] {
		all := true
		for _, n := range nodes[1:] {
			if _, ok := h.nodes[n]; !ok {
				all = false
				break
			}
		}
		if all {
			return h
		}
	}
	return t.c.root
}

// AncestorAtTier returns h or its nearest ancestor whose tier is exactly tier, or nil.
func (t Tree) AncestorAtTier(h *HyperNode, tier int) *HyperNode {
	for a := h; a != nil; a = a.Parent {
		if a.Tier == tier {
			return a
		}
	}
	return nil
}
