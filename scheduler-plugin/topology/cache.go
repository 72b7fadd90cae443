// Package topology keeps the HyperNode tree the scheduler places gangs in. It follows Volcano's
// semantics: a HyperNode's HyperNode members are named by exactMatch, its Node members by exactMatch,
// regexMatch (on the node name) or labelMatch; every HyperNode has at most one parent; cycles and
// second parents make the tree invalid (NotReady); a virtual root of tier max+1 sits above every
// parentless HyperNode and contains every node. Lower tier = tighter network domain.
//
// The Cache is fed by HyperNode and Node events. A Node event updates only the memberships of that
// node (the HyperNodes that select it and their ancestors); a HyperNode event resolves that
// HyperNode's node members and marks the structure (parents, cycles, tiers, flattened node sets)
// for a rebuild, which happens once, on the next read, however many HyperNodes changed.
package topology

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// RootName names the virtual HyperNode above every parentless HyperNode. It is not a valid object
// name, so it never collides with a real HyperNode.
const RootName = "<cluster-root>"

// Cache is the HyperNode tree. All methods are safe for concurrent use.
type Cache struct {
	mu sync.RWMutex

	specs map[string]*spec
	nodes map[string]*nodeState

	// Indexes from a node's name or labels to the HyperNodes whose Node members may select it.
	exactIdx    map[string]map[string]struct{} // node name → HyperNodes naming it
	prefixIdx   map[string]map[string]struct{} // literal prefix of an anchored regex → HyperNodes
	scanRegex   map[string]struct{}            // HyperNodes with a regex that cannot be indexed
	labelIdx    map[string]map[string]struct{} // "k=v" required by a label member → HyperNodes
	scanLabel   map[string]struct{}            // HyperNodes with an expression-only label member
	nodeByLabel map[string]map[string]struct{} // "k=v" → node names carrying it

	// Resolved structure. Valid when !dirty.
	dirty      bool
	hns        map[string]*HyperNode
	list       []*HyperNode // by (tier, name); Index is the position
	byTier     map[int][]*HyperNode
	tiers      []int
	tierNames  map[string]struct{}
	root       *HyperNode
	containers map[string][]*HyperNode // node → HyperNodes containing it (flattened), by (tier, name)
	invalid    string                  // why the structure is invalid; "" when valid
	warnings   []string

	generation int64
	synced     func() bool
	changed    chan struct{}

	// afterRebuild, when set (tests only), runs in Read after a rebuild, with no lock held.
	afterRebuild func()
}

type nodeState struct {
	labels map[string]string
	direct map[string]struct{} // HyperNodes whose Node members select this node
}

// NewCache returns an empty cache that is ready (synced) until SetSynced says otherwise.
func NewCache() *Cache {
	return &Cache{
		specs:       map[string]*spec{},
		nodes:       map[string]*nodeState{},
		exactIdx:    map[string]map[string]struct{}{},
		prefixIdx:   map[string]map[string]struct{}{},
		scanRegex:   map[string]struct{}{},
		labelIdx:    map[string]map[string]struct{}{},
		scanLabel:   map[string]struct{}{},
		nodeByLabel: map[string]map[string]struct{}{},
		dirty:       true,
		changed:     make(chan struct{}, 1),
	}
}

// SetSynced installs the readiness gate: the tree is not ready while synced() is false (informers
// still listing).
func (c *Cache) SetSynced(synced func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced = synced
}

// Changed is signalled (coalesced) after every change to the tree.
func (c *Cache) Changed() <-chan struct{} { return c.changed }

func (c *Cache) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// AddOrUpdateHyperNode adds a HyperNode or applies a new version of it.
func (c *Cache) AddOrUpdateHyperNode(hn *topologyv1alpha1.HyperNode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.specs[hn.Name]; ok {
		if sameShape(old, hn) {
			return
		}
		c.removeSpec(old)
	}
	s := parseSpec(hn)
	c.specs[s.name] = s
	c.indexSpec(s)
	c.resolveSpec(s)
	c.dirty = true
	c.generation++
	c.notify()
}

// DeleteHyperNode removes a HyperNode.
func (c *Cache) DeleteHyperNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.specs[name]
	if !ok {
		return
	}
	c.removeSpec(s)
	delete(c.specs, name)
	c.dirty = true
	c.generation++
	c.notify()
}

// AddOrUpdateNode adds a node or applies its new labels. Only the node's own memberships change.
func (c *Cache) AddOrUpdateNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := node.Name
	ns, existed := c.nodes[name]
	if existed && labelsEqual(ns.labels, node.Labels) {
		return
	}
	if !existed {
		ns = &nodeState{direct: map[string]struct{}{}}
		c.nodes[name] = ns
	} else {
		c.unindexNodeLabels(name, ns.labels)
	}
	ns.labels = copyLabels(node.Labels)
	c.indexNodeLabels(name, ns.labels)

	want := c.matchNode(name, ns.labels)
	changed := !existed
	for h := range ns.direct {
		if _, ok := want[h]; !ok {
			c.leave(name, ns, h)
			changed = true
		}
	}
	for h := range want {
		if _, ok := ns.direct[h]; !ok {
			c.join(name, ns, h)
			changed = true
		}
	}
	if !c.dirty {
		c.refreshContainers(name, ns)
	}
	if changed {
		c.generation++
		c.notify()
	}
}

// DeleteNode removes a node from every HyperNode.
func (c *Cache) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, ok := c.nodes[name]
	if !ok {
		return
	}
	for h := range ns.direct {
		c.leave(name, ns, h)
	}
	c.unindexNodeLabels(name, ns.labels)
	delete(c.nodes, name)
	delete(c.containers, name)
	c.generation++
	c.notify()
}

// join makes node a direct member of HyperNode h, updating flattened sets when the structure is live.
func (c *Cache) join(node string, ns *nodeState, h string) {
	ns.direct[h] = struct{}{}
	if s := c.specs[h]; s != nil {
		s.direct[node] = struct{}{}
	}
	if c.dirty || c.invalid != "" {
		return
	}
	for a := c.hns[h]; a != nil && !a.root; a = a.Parent {
		a.nodes[node]++
	}
}

func (c *Cache) leave(node string, ns *nodeState, h string) {
	delete(ns.direct, h)
	if s := c.specs[h]; s != nil {
		delete(s.direct, node)
	}
	if c.dirty || c.invalid != "" {
		return
	}
	for a := c.hns[h]; a != nil && !a.root; a = a.Parent {
		if a.nodes[node] <= 1 {
			delete(a.nodes, node)
		} else {
			a.nodes[node]--
		}
	}
}

// refreshContainers recomputes the HyperNodes that contain one node from its direct memberships.
func (c *Cache) refreshContainers(node string, ns *nodeState) {
	if c.invalid != "" {
		return
	}
	seen := map[*HyperNode]struct{}{}
	var out []*HyperNode
	for h := range ns.direct {
		for a := c.hns[h]; a != nil && !a.root; a = a.Parent {
			if _, ok := seen[a]; ok {
				break
			}
			seen[a] = struct{}{}
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		delete(c.containers, node)
		return
	}
	sortHyperNodes(out)
	c.containers[node] = out
}

// matchNode returns the HyperNodes whose Node members select the node, using the member indexes.
func (c *Cache) matchNode(name string, nodeLabels map[string]string) map[string]struct{} {
	cand := map[string]struct{}{}
	for h := range c.exactIdx[name] {
		cand[h] = struct{}{}
	}
	for i := 1; i <= len(name); i++ {
		for h := range c.prefixIdx[name[:i]] {
			cand[h] = struct{}{}
		}
	}
	for h := range c.scanRegex {
		cand[h] = struct{}{}
	}
	for k, v := range nodeLabels {
		for h := range c.labelIdx[k+"="+v] {
			cand[h] = struct{}{}
		}
	}
	for h := range c.scanLabel {
		cand[h] = struct{}{}
	}
	out := map[string]struct{}{}
	for h := range cand {
		if s := c.specs[h]; s != nil && s.matchesNode(name, nodeLabels) {
			out[h] = struct{}{}
		}
	}
	return out
}

// resolveSpec computes a new HyperNode's direct node members from the nodes the cache knows.
func (c *Cache) resolveSpec(s *spec) {
	add := func(n string) {
		ns := c.nodes[n]
		if ns == nil {
			return
		}
		if _, done := s.direct[n]; done {
			return
		}
		s.direct[n] = struct{}{}
		ns.direct[s.name] = struct{}{}
	}
	for _, e := range s.exact {
		add(e)
	}
	for _, r := range s.regexes {
		for n := range c.nodes {
			if (r.prefix == "" || strings.HasPrefix(n, r.prefix)) && r.re.MatchString(n) {
				add(n)
			}
		}
	}
	for _, l := range s.labels {
		if l.pair != "" {
			for n := range c.nodeByLabel[l.pair] {
				if l.sel.Matches(labelSet(c.nodes[n].labels)) {
					add(n)
				}
			}
			continue
		}
		for n, ns := range c.nodes {
			if l.sel.Matches(labelSet(ns.labels)) {
				add(n)
			}
		}
	}
}

func (c *Cache) indexSpec(s *spec) {
	for _, e := range s.exact {
		addIdx(c.exactIdx, e, s.name)
	}
	for _, r := range s.regexes {
		if r.prefix != "" {
			addIdx(c.prefixIdx, r.prefix, s.name)
		} else {
			c.scanRegex[s.name] = struct{}{}
		}
	}
	for _, l := range s.labels {
		if l.pair != "" {
			addIdx(c.labelIdx, l.pair, s.name)
		} else {
			c.scanLabel[s.name] = struct{}{}
		}
	}
}

// removeSpec drops a HyperNode's indexes and its nodes' back references (not c.specs itself).
func (c *Cache) removeSpec(s *spec) {
	for _, e := range s.exact {
		delIdx(c.exactIdx, e, s.name)
	}
	for _, r := range s.regexes {
		if r.prefix != "" {
			delIdx(c.prefixIdx, r.prefix, s.name)
		}
	}
	delete(c.scanRegex, s.name)
	for _, l := range s.labels {
		if l.pair != "" {
			delIdx(c.labelIdx, l.pair, s.name)
		}
	}
	delete(c.scanLabel, s.name)
	for n := range s.direct {
		if ns := c.nodes[n]; ns != nil {
			delete(ns.direct, s.name)
		}
	}
	s.direct = map[string]struct{}{}
}

func (c *Cache) indexNodeLabels(name string, l map[string]string) {
	for k, v := range l {
		addIdx(c.nodeByLabel, k+"="+v, name)
	}
}

func (c *Cache) unindexNodeLabels(name string, l map[string]string) {
	for k, v := range l {
		delIdx(c.nodeByLabel, k+"="+v, name)
	}
}

// rebuild resolves parents, validates the tree and flattens node sets. Caller holds the write lock.
func (c *Cache) rebuild() {
	c.dirty = false
	c.invalid = ""
	c.warnings = nil
	hns := make(map[string]*HyperNode, len(c.specs))
	names := make([]string, 0, len(c.specs))
	for name, s := range c.specs {
		hns[name] = &HyperNode{Name: name, Tier: s.tier, TierName: s.tierName, nodes: map[string]int32{}}
		names = append(names, name)
		c.warnings = append(c.warnings, s.warnings...)
	}
	sort.Strings(names)

	var problems []string
	for _, name := range names {
		s, h := c.specs[name], hns[name]
		for _, child := range s.children {
			ch := hns[child]
			if ch == nil {
				c.warnings = append(c.warnings, fmt.Sprintf("HyperNode %s names member HyperNode %s, which does not exist", name, child))
				continue
			}
			if ch == h {
				problems = append(problems, fmt.Sprintf("cycle: HyperNode %s is a member of itself", name))
				continue
			}
			if ch.Parent == h {
				continue
			}
			if ch.Parent != nil {
				problems = append(problems, fmt.Sprintf("HyperNode %s has two parents, %s and %s", child, ch.Parent.Name, name))
				continue
			}
			ch.Parent = h
			h.Children = append(h.Children, ch)
		}
	}
	if len(problems) == 0 {
		problems = append(problems, findCycles(names, hns)...)
	}
	// Tier names are resolved per tree (a HyperNode named X or one below it), so one name at
	// different tiers in different trees (leaf at tier 1 beside NVL racks' leaf at tier 2) is normal.
	tierNames := map[string]struct{}{}
	for _, name := range names {
		if tn := hns[name].TierName; tn != "" {
			tierNames[tn] = struct{}{}
		}
	}
	c.tierNames = tierNames
	if len(problems) > 0 {
		c.invalid = strings.Join(problems, "; ")
		c.hns, c.list, c.byTier, c.tiers, c.containers = map[string]*HyperNode{}, nil, map[int][]*HyperNode{}, nil, map[string][]*HyperNode{}
		c.root = &HyperNode{Name: RootName, root: true, Tier: 1}
		return
	}

	// Flatten bottom-up: a HyperNode's count for a node is the number of membership paths to it.
	var flatten func(h *HyperNode)
	flatten = func(h *HyperNode) {
		for n := range c.specs[h.Name].direct {
			h.nodes[n]++
		}
		for _, ch := range h.Children {
			flatten(ch)
			for n, k := range ch.nodes {
				h.nodes[n] += k
			}
		}
	}
	list := make([]*HyperNode, 0, len(hns))
	maxTier := 0
	root := &HyperNode{Name: RootName, root: true}
	for _, name := range names {
		h := hns[name]
		list = append(list, h)
		if h.Tier > maxTier {
			maxTier = h.Tier
		}
		if h.Parent == nil {
			flatten(h)
			root.Children = append(root.Children, h)
		}
	}
	for _, h := range root.Children {
		h.Parent = root
	}
	root.Tier = maxTier + 1
	sortHyperNodes(list)
	byTier := map[int][]*HyperNode{}
	var tiers []int
	containers := make(map[string][]*HyperNode, len(c.nodes))
	for i, h := range list {
		h.Index = i
		if _, ok := byTier[h.Tier]; !ok {
			tiers = append(tiers, h.Tier)
		}
		byTier[h.Tier] = append(byTier[h.Tier], h)
		for n := range h.nodes {
			containers[n] = append(containers[n], h) // list order is (tier, name) already
		}
	}
	root.Index = len(list)
	sort.Ints(tiers)
	c.hns, c.list, c.byTier, c.tiers, c.root, c.containers = hns, list, byTier, tiers, root, containers
}

// findCycles walks parent links; with one parent each, a cycle is a closed parent chain.
func findCycles(names []string, hns map[string]*HyperNode) []string {
	const (
		unseen = iota
		onPath
		done
	)
	color := make(map[*HyperNode]int, len(hns))
	var problems []string
	for _, name := range names {
		var path []*HyperNode
		h := hns[name]
		for h != nil && color[h] == unseen {
			color[h] = onPath
			path = append(path, h)
			h = h.Parent
		}
		if h != nil && color[h] == onPath {
			var cyc []string
			start := false
			for _, p := range path {
				if p == h {
					start = true
				}
				if start {
					cyc = append(cyc, p.Name)
				}
			}
			// Report the cycle in member order (parent after child) and close it.
			problems = append(problems, fmt.Sprintf("cycle: %s -> %s", strings.Join(cyc, " -> "), h.Name))
		}
		for _, p := range path {
			color[p] = done
		}
	}
	return problems
}

func sortHyperNodes(l []*HyperNode) {
	sort.Slice(l, func(i, j int) bool {
		if l[i].Tier != l[j].Tier {
			return l[i].Tier < l[j].Tier
		}
		return l[i].Name < l[j].Name
	})
}

func addIdx(m map[string]map[string]struct{}, k, v string) {
	s := m[k]
	if s == nil {
		s = map[string]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func delIdx(m map[string]map[string]struct{}, k, v string) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func copyLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}
