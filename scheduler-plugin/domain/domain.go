// Package domain chooses the HyperNode a gang is placed in: tier by tier from the lowest, the
// HyperNode whose free capacity (from the scheduler's snapshot, so reserved pods count) holds the
// gang's remaining pods with the least room left over (ties by name). A hard constraint never goes
// above its highest allowed tier; a soft one walks up to the virtual cluster root. A gang that already
// has pods on nodes stays inside the lowest HyperNode containing them (or above it).
//
// Choose is one pass over the nodes (free capacity → pods of the gang's shape each node holds, added
// to every HyperNode containing the node) and one pass over the candidate HyperNodes of each tier, so
// it costs O(nodes × depth + HyperNodes). A gang that fits no single child of the chosen HyperNode is
// then packed into the fewest of its leaves (spill.go).
package domain

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Demand is what a gang still has to place.
type Demand struct {
	// Pods holds the requests of each pod still to place (at least one).
	Pods []corev1.ResourceList
	// Min is an aggregate floor the chosen domain's free capacity must also cover (the PodGroup's
	// minResources less what its placed pods use); nil for none.
	Min corev1.ResourceList
	// Eligible, when set, holds one node predicate per entry of Pods (a nil predicate accepts every
	// node). It is for gangs whose pods differ in node constraints (nodeSelector, node affinity,
	// tolerations): each pod is then packed only onto nodes it may use, and a node counts for the
	// domain's room when some pod may use it. Request.Eligible still applies to every pod.
	Eligible []func(*corev1.Node) bool
}

// Freed is capacity that would become free on a node (reserved pods of another gang, released).
type Freed struct {
	Resources corev1.ResourceList
	Pods      int
}

// Request is one domain choice.
type Request struct {
	Demand Demand
	// Topology is false for gangs without a network topology constraint: any node will do.
	Topology bool
	Limit    gang.Limit
	// Placed lists the nodes holding the gang's bound or reserved pods.
	Placed []string
	// Eligible reports whether the gang's pods may run on a node at all (taints, node affinity,
	// cordon); nil accepts every node.
	Eligible func(*corev1.Node) bool
	// Freed is extra free capacity per node name (what-if: other gangs release their reservations).
	Freed map[string]Freed
	// MaxCandidatesPerTier bounds the detailed (packing) evaluations per tier; <= 0 means 64.
	MaxCandidatesPerTier int
}

// Choice is a chosen domain.
type Choice struct {
	HyperNode string
	Tier      int
	// Root is true when the domain is the whole cluster; Nodes is then nil unless the gang spills.
	Root  bool
	Nodes sets.Set[string]
	// Spilled names the leaf HyperNodes a gang that fits no single child of the domain is packed
	// into (the fewest, best fit first); Nodes is then only their nodes. Empty otherwise.
	Spilled []string
	// Need is the number of pods placed in the domain; Room how many of them it holds.
	Need, Room int
	// Rooms[h.Index] is how many pods of the gang's shape HyperNode h holds (for scoring), for the
	// tree generation the choice was made on.
	Rooms []int32
	// Evaluated counts the candidates that got a detailed check.
	Evaluated int
	// Groups is where each sub-group goes, for a gang with sub-groups (ChooseGroups); nil otherwise.
	Groups []GroupPlacement
}

// Unsatisfiable explains why no domain fits.
type Unsatisfiable struct {
	Msg string
	// Placement is the same in numbers, per tier (placement.go); nil when the gang failed before
	// the tiers were measured (no pods, a pod larger than any node, placed pods beyond the limit).
	Placement *gangcontract.Placement
}

func (u *Unsatisfiable) Error() string { return u.Msg }

// vector is a resource amount for the demand's resource names: milli-CPU, others in their unit.
type vector []int64

type problem struct {
	names []corev1.ResourceName
	pods  []vector
	shape vector // element-wise max of pods (sizes pods for packing)
	// slot is the per-pod size rooms are counted in: the pods' common request when they are identical
	// (rooms are then exact), their element-wise minimum otherwise (rooms are then an upper bound and
	// candidates get a packing check).
	slot  vector
	homog bool
	// total is what a domain's summed free capacity must cover: the pods' sum (when they differ) and
	// the PodGroup's minResources floor; nil when the rooms already say it all.
	total vector
	// floor is the minResources floor alone (nil without one), to name it in messages.
	floor vector
}

func newProblem(d Demand) *problem {
	seen := map[corev1.ResourceName]bool{}
	var names []corev1.ResourceName
	add := func(rl corev1.ResourceList) {
		for n, q := range rl {
			if !seen[n] && !q.IsZero() {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	for _, p := range d.Pods {
		add(p)
	}
	add(d.Min)
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	p := &problem{names: names, shape: make(vector, len(names)), homog: true}
	sum := make(vector, len(names))
	for i, rl := range d.Pods {
		v := p.vec(rl)
		p.pods = append(p.pods, v)
		for j := range v {
			p.shape[j] = max(p.shape[j], v[j])
			sum[j] += v[j]
		}
		if i == 0 {
			p.slot = append(vector(nil), v...)
		} else {
			if !equal(v, p.pods[0]) {
				p.homog = false
			}
			for j := range v {
				p.slot[j] = min(p.slot[j], v[j])
			}
		}
	}
	if len(d.Eligible) > 0 {
		// Rooms count nodes any pod may use: only a packing check that honours each pod's own
		// predicate is exact.
		p.homog = false
	}
	if !p.homog {
		p.total = sum
	}
	if len(d.Min) > 0 {
		floor := p.vec(d.Min)
		p.floor = floor
		if p.total == nil {
			p.total = make(vector, len(names))
		}
		for j := range floor {
			p.total[j] = max(p.total[j], floor[j])
		}
	}
	return p
}

func (p *problem) vec(rl corev1.ResourceList) vector { return Amounts(p.names, rl) }

// Amounts is rl as a vector over names: milli-CPU, other resources in their unit (0 when absent).
func Amounts(names []corev1.ResourceName, rl corev1.ResourceList) []int64 {
	v := make([]int64, len(names))
	for i, n := range names {
		q, ok := rl[n]
		if !ok {
			continue
		}
		if n == corev1.ResourceCPU {
			v[i] = q.MilliValue()
		} else {
			v[i] = q.Value()
		}
	}
	return v
}

// NodeFree writes the node's free capacity (allocatable less requested, from the scheduler's
// snapshot, so reserved pods count) over names into out and returns its free pod slots.
func NodeFree(ni fwk.NodeInfo, names []corev1.ResourceName, out []int64) int64 {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	for i, n := range names {
		switch n {
		case corev1.ResourceCPU:
			out[i] = alloc.GetMilliCPU() - req.GetMilliCPU()
		case corev1.ResourceMemory:
			out[i] = alloc.GetMemory() - req.GetMemory()
		case corev1.ResourceEphemeralStorage:
			out[i] = alloc.GetEphemeralStorage() - req.GetEphemeralStorage()
		default:
			out[i] = alloc.GetScalarResources()[n] - req.GetScalarResources()[n]
		}
	}
	return int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
}

// free writes the node's free capacity into out and returns its free pod slots.
func (p *problem) free(ni fwk.NodeInfo, extra *Freed, out vector) int64 {
	pods := NodeFree(ni, p.names, out)
	if extra != nil {
		ev := p.vec(extra.Resources)
		for i := range out {
			out[i] += ev[i]
		}
		pods += int64(extra.Pods)
	}
	return pods
}

// slots is how many pods of the gang's slot size fit into free.
func (p *problem) slots(free vector, pods int64) int64 { return Slots(p.slot, free, pods) }

// Slots is how many pods of size slot fit into free capacity with pods free pod slots.
func Slots(slot, free []int64, pods int64) int64 {
	s := pods
	for i, need := range slot {
		if need <= 0 {
			continue
		}
		if free[i] <= 0 {
			return 0
		}
		s = min(s, free[i]/need)
	}
	return max(s, 0)
}

// Choose picks the domain for a gang; the error is an *Unsatisfiable explaining why none fits.
//
// It runs in passes, each a method of chooser that reads alone:
//
//  1. measure: one pass over the nodes: free capacity → slots of the gang's shape per node, summed
//     into every HyperNode containing the node (and the root);
//  2. without a topology constraint, the whole cluster (wholeCluster);
//  3. anchor: the lowest HyperNode holding the gang's placed pods, checked against the limit;
//  4. atTier, tier by tier from the lowest: the allowed candidates, those with room, best fit first,
//     each given the detailed check (fits);
//  5. atRoot: the cluster root, when the limit allows it;
//  6. choice: the chosen HyperNode's node set, narrowed by spill when the gang fits no single child.
func Choose(t topology.Tree, nodes []fwk.NodeInfo, req Request) (*Choice, error) {
	if len(req.Demand.Pods) == 0 {
		return nil, &Unsatisfiable{Msg: "no pods to place"}
	}
	c := newChooser(t, req, len(nodes))
	c.measure(nodes)
	if err := c.podTooBig(); err != nil {
		return nil, err
	}
	if !req.Topology {
		return c.wholeCluster()
	}
	anchor, err := c.anchor()
	if err != nil {
		return nil, err
	}
	c.placedIn = anchor
	var notes []string
	for _, tier := range t.Tiers() {
		if numericLimit(req.Limit) && tier > req.Limit.Tier {
			notes = append(notes, fmt.Sprintf("tier %d and above not allowed (%s)", tier, req.Limit.Describe))
			break
		}
		before := c.evaluated
		h, note := c.atTier(tier, anchor)
		c.noteEvaluated(tier, c.evaluated-before)
		if h != nil {
			return c.choice(h), nil
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	return c.atRoot(notes)
}

// chooser holds one Choose call's problem and the rooms measured for it.
type chooser struct {
	t       topology.Tree
	req     Request
	p       *problem
	need    int64
	maxCand int
	nh, k   int // real HyperNodes (the root's index); resource dimensions

	rooms   []int64 // slots per HyperNode index, the root last
	aggFree []int64 // summed free capacity per HyperNode (k per entry) when p.total is set

	// nodes is the snapshot; byName (node name → position) and slotsMemo are built only when a gang
	// spills (spill.go), so the common path pays nothing for them.
	nodes     []fwk.NodeInfo
	byName    map[string]int
	slotsMemo map[string]int64

	// Per-node free vectors, kept when a detailed check may need them (heterogeneous pods).
	keep     bool
	freeAll  []int64 // k per node, by position in the node list
	podsFree []int64
	nodeIdx  map[string]int
	podOK    [][]bool // podOK[node][pod]: may the pod use the node; nil when one predicate serves all

	evaluated int
	// placedIn is the lowest HyperNode holding the gang's placed pods (nil when none is placed);
	// tierEvaluated the detailed checks per tier (placement.go, failure path only).
	placedIn      *topology.HyperNode
	tierEvaluated map[int]int

	// bigPods are the distinct pod requests no eligible node's allocatable capacity holds yet
	// (measure drops each one a node holds); mostAlloc is the most of each resource one eligible
	// node has allocatable. A pod left in bigPods fits no node at any tier.
	bigPods   []vector
	mostAlloc vector
	allocBuf  vector
}

func newChooser(t topology.Tree, req Request, nodes int) *chooser {
	p := newProblem(req.Demand)
	c := &chooser{t: t, req: req, p: p, need: int64(len(p.pods)), maxCand: req.MaxCandidatesPerTier,
		nh: t.Len(), k: len(p.names)}
	if c.maxCand <= 0 {
		c.maxCand = 64
	}
	c.rooms = make([]int64, c.nh+1)
	if p.total != nil {
		c.aggFree = make([]int64, (c.nh+1)*c.k)
	}
	c.keep = !p.homog
	if c.keep {
		c.freeAll = make([]int64, nodes*c.k)
		c.podsFree = make([]int64, nodes)
		c.nodeIdx = make(map[string]int, nodes)
	}
	if len(req.Demand.Eligible) > 0 {
		c.podOK = make([][]bool, nodes)
	}
	return c
}

// measure is pass 1: every eligible node's slots of the gang's shape, added to the root and to each
// HyperNode containing the node.
func (c *chooser) measure(nodes []fwk.NodeInfo) {
	c.nodes = nodes
	k, nh := c.k, c.nh
	buf := make(vector, k)
	c.bigPods = c.p.distinct()
	c.mostAlloc = make(vector, k)
	for i, ni := range nodes {
		node := ni.Node()
		if node == nil || (c.req.Eligible != nil && !c.req.Eligible(node)) {
			continue
		}
		c.noteAllocatable(ni)
		if c.podOK != nil {
			if c.podOK[i] = eligiblePods(c.req.Demand.Eligible, len(c.p.pods), node); c.podOK[i] == nil {
				continue // no pod of the gang may use this node
			}
		}
		var extra *Freed
		if f, ok := c.req.Freed[node.Name]; ok {
			extra = &f
		}
		free := buf
		if c.keep {
			free = c.freeAll[i*k : (i+1)*k]
		}
		pods := c.p.free(ni, extra, free)
		if c.keep {
			c.podsFree[i] = pods
			c.nodeIdx[node.Name] = i
		}
		s := c.p.slots(free, pods)
		if s == 0 && c.aggFree == nil {
			continue
		}
		c.rooms[nh] += s
		if c.aggFree != nil {
			addPos(c.aggFree[nh*k:(nh+1)*k], free)
		}
		for _, h := range c.t.Containers(node.Name) {
			c.rooms[h.Index] += s
			if c.aggFree != nil {
				addPos(c.aggFree[h.Index*k:(h.Index+1)*k], free)
			}
		}
	}
}

// wholeCluster is the choice for a gang without a topology constraint: any node will do.
func (c *chooser) wholeCluster() (*Choice, error) {
	root := c.t.Root()
	if c.rooms[c.nh] >= c.need && c.minOK(c.nh) && c.fits(root) {
		return c.choice(root), nil
	}
	return nil, &Unsatisfiable{Msg: fmt.Sprintf("%s; %s", c.p.describe(c.need), c.roomNote("the cluster", c.nh))}
}

// anchor is the lowest HyperNode holding the gang's placed pods (nil when none is placed); the gang
// stays inside it or one of its ancestors, so it must be allowed by the limit.
func (c *chooser) anchor() (*topology.HyperNode, error) {
	if len(c.req.Placed) == 0 {
		return nil, nil
	}
	a := c.t.LCA(c.req.Placed)
	if !Allows(c.req.Limit, a) {
		rel := "outside"
		if numericLimit(c.req.Limit) {
			rel = "above"
		}
		return nil, &Unsatisfiable{Msg: fmt.Sprintf("the gang's placed pods already span %s (tier %d), %s %s", display(a), a.Tier, rel, c.req.Limit.Describe)}
	}
	return a, nil
}

// atTier returns the best-fit HyperNode of the tier that holds the gang, or a note saying why none
// does ("" when the tier has no candidate at all).
func (c *chooser) atTier(tier int, anchor *topology.HyperNode) (*topology.HyperNode, string) {
	cands := c.tierCandidates(tier, anchor)
	if c.req.Limit.Hard && c.req.Limit.TierName != "" {
		cands = allowedOnly(c.req.Limit, cands)
	}
	if len(cands) == 0 {
		return nil, ""
	}
	var feasible []*topology.HyperNode
	var best *topology.HyperNode
	for _, h := range cands {
		r := c.rooms[h.Index]
		if best == nil || r > c.rooms[best.Index] {
			best = h
		}
		if r >= c.need && c.minOK(h.Index) {
			feasible = append(feasible, h)
		}
	}
	if len(feasible) == 0 {
		if anchor != nil {
			return nil, fmt.Sprintf("tier-%d %s (holding the gang's placed pods)", tier, c.roomNote("HyperNode "+best.Name, best.Index))
		}
		return nil, fmt.Sprintf("no tier-%d HyperNode has room for %s (the best: %s)", tier, podCount(c.need), c.roomNote(best.Name, best.Index))
	}
	// Best fit: least room left over, ties by name; the detailed check on at most maxCand.
	sort.Slice(feasible, func(i, j int) bool {
		li, lj := c.rooms[feasible[i].Index], c.rooms[feasible[j].Index]
		if li != lj {
			return li < lj
		}
		return feasible[i].Name < feasible[j].Name
	})
	for i, h := range feasible {
		if i >= c.maxCand {
			break
		}
		if c.fits(h) {
			return h, ""
		}
	}
	return nil, fmt.Sprintf("no tier-%d HyperNode can pack the pods (%d checked)", tier, min(len(feasible), c.maxCand))
}

// tierCandidates are the tier's HyperNodes a gang may use before its limit is applied: all of the
// tier, or the ancestor at that tier of the HyperNode holding its placed pods.
func (c *chooser) tierCandidates(tier int, anchor *topology.HyperNode) []*topology.HyperNode {
	if anchor != nil {
		if a := c.t.AncestorAtTier(anchor, tier); a != nil {
			return []*topology.HyperNode{a}
		}
		return nil
	}
	return c.t.AtTier(tier)
}

// atRoot is the last resort: the cluster root when the limit allows it; otherwise the error with
// the notes of every tier.
func (c *chooser) atRoot(notes []string) (*Choice, error) {
	root, l := c.t.Root(), c.req.Limit
	switch {
	case Allows(l, root):
		if c.rooms[c.nh] >= c.need && c.minOK(c.nh) && c.fits(root) {
			return c.choice(root), nil
		}
		notes = append(notes, c.roomNote("the whole cluster", c.nh))
	case l.TierName != "":
		notes = append(notes, fmt.Sprintf("only HyperNodes named %q and those below one are allowed (%s); trees without that name are never used", l.TierName, l.Describe))
	case l.AnyHyperNode:
		notes = append(notes, "the cluster root is not allowed (mode hard without a tier bound: one HyperNode of any tier)")
	case len(notes) == 0 || !strings.Contains(notes[len(notes)-1], "not allowed"):
		notes = append(notes, fmt.Sprintf("the cluster root (tier %d) is not allowed (%s)", root.Tier, l.Describe))
	}
	return nil, &Unsatisfiable{Msg: c.p.describe(c.need) + ": " + strings.Join(notes, "; "), Placement: c.placement()}
}

// minOK checks the aggregate floor (minResources, or the summed requests of differing pods) of
// HyperNode index idx.
func (c *chooser) minOK(idx int) bool {
	if c.aggFree == nil {
		return true
	}
	for i, v := range c.p.total {
		if c.aggFree[idx*c.k+i] < v {
			return false
		}
	}
	return true
}

// fits is the detailed check: exact for identical pods; first-fit decreasing otherwise.
func (c *chooser) fits(h *topology.HyperNode) bool {
	c.evaluated++
	if c.p.homog {
		return true
	}
	var members []int
	if h.IsRoot() {
		for _, i := range c.nodeIdx {
			members = append(members, i)
		}
	} else {
		h.EachNode(func(n string) {
			if i, ok := c.nodeIdx[n]; ok {
				members = append(members, i)
			}
		})
	}
	return pack(c.p, members, c.freeAll, c.podsFree, c.podOK)
}

// freeOf recomputes an eligible node's free capacity (nil when the node is unknown or ineligible).
// Only the spill path uses it, so measure keeps no per-node state for identical pods.
func (c *chooser) freeOf(name string) (vector, int64) {
	if c.byName == nil {
		c.byName = make(map[string]int, len(c.nodes))
		for i, ni := range c.nodes {
			if n := ni.Node(); n != nil {
				c.byName[n.Name] = i
			}
		}
	}
	i, ok := c.byName[name]
	if !ok {
		return nil, 0
	}
	if c.keep {
		if _, eligible := c.nodeIdx[name]; !eligible {
			return nil, 0
		}
		return c.freeAll[i*c.k : (i+1)*c.k], c.podsFree[i]
	}
	ni := c.nodes[i]
	if c.req.Eligible != nil && !c.req.Eligible(ni.Node()) {
		return nil, 0
	}
	var extra *Freed
	if f, ok := c.req.Freed[name]; ok {
		extra = &f
	}
	free := make(vector, c.k)
	pods := c.p.free(ni, extra, free)
	return free, pods
}

// slotsOf is how many pods of the gang's shape the node holds (memoized; spill path only).
func (c *chooser) slotsOf(name string) int64 {
	if s, ok := c.slotsMemo[name]; ok {
		return s
	}
	if c.slotsMemo == nil {
		c.slotsMemo = map[string]int64{}
	}
	var s int64
	if free, pods := c.freeOf(name); free != nil {
		s = c.p.slots(free, pods)
	}
	c.slotsMemo[name] = s
	return s
}

// eachNode calls fn for every node of the snapshot (spill path only: the root's direct nodes).
func (c *chooser) eachNode(fn func(string)) {
	for _, ni := range c.nodes {
		if n := ni.Node(); n != nil {
			fn(n.Name)
		}
	}
}

// subsetFits checks a spilled subset of a domain as fits and minOK check a domain.
func (c *chooser) subsetFits(nodes sets.Set[string]) bool {
	if c.p.total != nil {
		sum := make(vector, c.k)
		for n := range nodes {
			if free, _ := c.freeOf(n); free != nil {
				addPos(sum, free)
			}
		}
		for r, v := range c.p.total {
			if sum[r] < v {
				return false
			}
		}
	}
	if c.p.homog {
		return true
	}
	members := make([]int, 0, nodes.Len())
	for n := range nodes {
		if i, ok := c.nodeIdx[n]; ok {
			members = append(members, i)
		}
	}
	return pack(c.p, members, c.freeAll, c.podsFree, c.podOK)
}

// choice builds the Choice for HyperNode h: its nodes (none for the root), narrowed to the fewest
// leaves when the gang fits no single child (spill), and the rooms for scoring.
func (c *chooser) choice(h *topology.HyperNode) *Choice {
	ch := &Choice{HyperNode: h.Name, Tier: h.Tier, Root: h.IsRoot(), Need: int(c.need), Room: int(c.rooms[h.Index]), Evaluated: c.evaluated}
	if !ch.Root {
		ch.Nodes = sets.New[string]()
		h.EachNode(func(n string) { ch.Nodes.Insert(n) })
	}
	if c.req.Topology && (h.IsRoot() || len(h.Children) > 0) {
		sp := newSpill(c.t, c.rooms, c.slotsOf, c.eachNode, c.req.Placed)
		if sp.plan(h, c.need) && c.subsetFits(sp.nodes) {
			ch.Nodes = sp.nodes
			ch.Spilled = sp.leaves
			sort.Strings(ch.Spilled)
		}
	}
	ch.Rooms = make([]int32, len(c.rooms))
	for i, r := range c.rooms {
		ch.Rooms[i] = int32(min(r, math.MaxInt32))
	}
	return ch
}

// Allows reports whether a hard limit lets the gang use HyperNode h (the root included); soft
// limits allow everything.
//   - highestTierAllowed: h's tier is at most the limit (the root too, when its tier is).
//   - highestTierName X, per tree: h's tierName is X, or one of h's ancestors' is (a key and its
//     last segment name the same tier, topology.TierNamesMatch). The root never is.
//   - hard without a bound: any real HyperNode, never the root.
func Allows(l gang.Limit, h *topology.HyperNode) bool {
	switch {
	case !l.Hard:
		return true
	case l.TierName != "":
		for a := h; a != nil && !a.IsRoot(); a = a.Parent {
			if a.NamedAs(l.TierName) {
				return true
			}
		}
		return false
	case l.AnyHyperNode:
		return !h.IsRoot()
	default:
		return h.Tier <= l.Tier
	}
}

// numericLimit is a hard highestTierAllowed limit (tiers above it are skipped outright).
func numericLimit(l gang.Limit) bool { return l.Hard && l.TierName == "" && !l.AnyHyperNode }

func allowedOnly(l gang.Limit, hs []*topology.HyperNode) []*topology.HyperNode {
	out := make([]*topology.HyperNode, 0, len(hs))
	for _, h := range hs {
		if Allows(l, h) {
			out = append(out, h)
		}
	}
	return out
}

// describe renders the demand, e.g. "8 more pods needing 64 cpu, 64 nvidia.com/gpu", and the
// PodGroup's minResources floor where it asks for more than the pods ("; minResources floor 150 cpu").
func (p *problem) describe(need int64) string {
	total := make(vector, len(p.names))
	for _, v := range p.pods {
		for i := range v {
			total[i] += v[i]
		}
	}
	s := "1 more pod"
	if need != 1 {
		s = fmt.Sprintf("%d more pods", need)
	}
	if d := p.amounts(total); d != "" {
		s += " needing " + d
	}
	if p.floor != nil {
		above := make(vector, len(p.floor))
		for i, v := range p.floor {
			if v > total[i] {
				above[i] = v
			}
		}
		if d := p.amounts(above); d != "" {
			s += " (the PodGroup's minResources ask for " + d + ")"
		}
	}
	return s
}

// amounts renders the non-zero entries of v with their units: cpu in cores ("1.25 cpu", never
// millicores, so that every figure of a message compares), memory and ephemeral storage as binary
// quantities ("3Gi memory"), other resources as counts ("8 nvidia.com/gpu").
func (p *problem) amounts(v vector) string {
	var parts []string
	for i, n := range p.names {
		if v[i] == 0 {
			continue
		}
		parts = append(parts, amount(n, v[i]))
	}
	return strings.Join(parts, ", ")
}

func amount(n corev1.ResourceName, v int64) string {
	switch n {
	case corev1.ResourceCPU:
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64) + " cpu"
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String() + " " + string(n)
	default:
		return resource.NewQuantity(v, resource.DecimalSI).String() + " " + string(n)
	}
}

// podCount is "1 pod" or "n pods".
func podCount(n int64) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// roomNote says what the domain at index idx holds, in pods of the gang's shape, and, when that
// is enough but the summed free capacity is below what the gang needs in total (minResources, or
// the sum of differing pods), which resource falls short: "spine-0 has room for 440 of them but
// only 16 cpu free of the 150 cpu the gang needs in total".
func (c *chooser) roomNote(name string, idx int) string {
	r := c.rooms[idx]
	var s string
	switch {
	case r == 0:
		s = name + " has room for none of them"
	case r >= c.need:
		s = fmt.Sprintf("%s has room for all %s", name, podCount(c.need))
	default:
		s = fmt.Sprintf("%s has room for %d of them", name, r)
	}
	if r < c.need || c.aggFree == nil {
		return s
	}
	for i, v := range c.p.total {
		if free := c.aggFree[idx*c.k+i]; free < v {
			n := c.p.names[i]
			return fmt.Sprintf("%s but only %s free of the %s the gang needs in total", s, amount(n, max(free, 0)), amount(n, v))
		}
	}
	return s
}

// distinct is the pods' distinct request vectors.
func (p *problem) distinct() []vector {
	var out []vector
	for _, v := range p.pods {
		dup := false
		for _, o := range out {
			if equal(o, v) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}

// noteAllocatable drops from bigPods the pods an eligible node's allocatable capacity holds, and
// raises mostAlloc.
func (c *chooser) noteAllocatable(ni fwk.NodeInfo) {
	alloc := ni.GetAllocatable()
	if c.allocBuf == nil {
		c.allocBuf = make(vector, c.k)
	}
	have := c.allocBuf
	for i, n := range c.p.names {
		switch n {
		case corev1.ResourceCPU:
			have[i] = alloc.GetMilliCPU()
		case corev1.ResourceMemory:
			have[i] = alloc.GetMemory()
		case corev1.ResourceEphemeralStorage:
			have[i] = alloc.GetEphemeralStorage()
		default:
			have[i] = alloc.GetScalarResources()[n]
		}
		c.mostAlloc[i] = max(c.mostAlloc[i], have[i])
	}
	if len(c.bigPods) == 0 {
		return
	}
	kept := c.bigPods[:0]
	for _, v := range c.bigPods {
		fits := true
		for i := range v {
			if v[i] > have[i] {
				fits = false
				break
			}
		}
		if !fits {
			kept = append(kept, v)
		}
	}
	c.bigPods = kept
}

// podTooBig is the error for a gang with a pod that no eligible node could hold even empty: no
// HyperNode of any tier, nor the whole cluster, helps, so it says so instead of listing tiers.
func (c *chooser) podTooBig() error {
	if len(c.bigPods) == 0 {
		return nil
	}
	v := c.bigPods[0]
	var short []string
	for i, need := range v {
		if need > c.mostAlloc[i] {
			short = append(short, fmt.Sprintf("%s (at most %s on one node)", amount(c.p.names[i], need), amount(c.p.names[i], c.mostAlloc[i])))
		}
	}
	return &Unsatisfiable{Msg: fmt.Sprintf("no node can hold one pod of the gang, at any tier: a pod asks for %s, more than any node the pod may use has allocatable; lower the pod's requests or add larger nodes",
		strings.Join(short, ", "))}
}

func display(h *topology.HyperNode) string {
	if h.IsRoot() {
		return "the cluster root"
	}
	return "HyperNode " + h.Name
}

// eligiblePods says, per pod, whether it may use the node (a missing or nil predicate accepts it);
// nil when no pod may.
func eligiblePods(preds []func(*corev1.Node) bool, pods int, node *corev1.Node) []bool {
	ok := make([]bool, pods)
	some := false
	for pi := range ok {
		ok[pi] = pi >= len(preds) || preds[pi] == nil || preds[pi](node)
		some = some || ok[pi]
	}
	if !some {
		return nil
	}
	return ok
}

// pack places every pod on the member nodes, first-fit by decreasing size. podOK (nil: every pod
// may use every node) is indexed by node index, then pod.
func pack(p *problem, members []int, freeAll, podsFree []int64, podOK [][]bool) bool {
	k := len(p.names)
	sort.Ints(members)
	free := make([]int64, len(members)*k)
	slots := make([]int64, len(members))
	for j, i := range members {
		copy(free[j*k:(j+1)*k], freeAll[i*k:(i+1)*k])
		slots[j] = podsFree[i]
	}
	order := make([]int, len(p.pods))
	size := make([]float64, len(p.pods))
	for i, v := range p.pods {
		order[i] = i
		for r := range v {
			if p.shape[r] > 0 {
				size[i] += float64(v[r]) / float64(p.shape[r])
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] > size[order[b]] })
	for _, pi := range order {
		v := p.pods[pi]
		placed := false
		for j, i := range members {
			if slots[j] <= 0 || (podOK != nil && !podOK[i][pi]) {
				continue
			}
			f := free[j*k : (j+1)*k]
			ok := true
			for r := range v {
				if v[r] > f[r] {
					ok = false
					break
				}
			}
			if ok {
				for r := range v {
					f[r] -= v[r]
				}
				slots[j]--
				placed = true
				break
			}
		}
		if !placed {
			return false
		}
	}
	return true
}

func addPos(dst []int64, v vector) {
	for i, x := range v {
		if x > 0 {
			dst[i] += x
		}
	}
}

func equal(a, b vector) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
