package domain

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Group is one sub-group of a gang to place (PodGroup.spec.subGroupPolicy), or the gang's pods in
// no sub-group.
type Group struct {
	Name string
	// Pods is how many of its pods still have to be placed (its subGroupSize less its placed pods).
	Pods int
	// Topology is false for the gang's pods in no sub-group: they may go anywhere in the gang's
	// domain. Otherwise the group is placed inside one HyperNode Limit allows (a soft Limit allows
	// every HyperNode inside the gang's domain; Want is then the tier it prefers).
	Topology bool
	Limit    gang.Limit
	// Want is a soft group's limit as if it were hard; a placement it does not allow is a fallback,
	// recorded in GroupPlacement.Fallback. Unused for hard groups.
	Want gang.Limit
	// Required: the gang does not start without this group (minSubGroups, minMember). Groups that
	// are not required are placed when they fit, after the required ones.
	Required bool
	// Placed lists the nodes holding the group's placed pods: its domain must contain them.
	Placed []string
}

// GroupRequest is a domain choice for a gang with sub-groups.
type GroupRequest struct {
	// Request is the gang's own part: its Limit and Topology, Placed (all its placed pods), Eligible,
	// Freed and MaxCandidatesPerTier. Demand.Pods holds one entry, the size every pod is counted in
	// (the element-wise maximum of the gang's pods); Demand.Eligible and Demand.Min are not used.
	Request
	Groups []Group
	// SearchBudget bounds the exact search per gang domain (search nodes); <= 0 means 50,000.
	SearchBudget int
}

// GroupPlacement is where one group goes.
type GroupPlacement struct {
	Name string
	// Placed is false for a group that is not required and did not fit; the rest is then empty.
	Placed    bool
	HyperNode string
	Tier      int
	Root      bool
	// Quota is how many of the group's pods each node takes (in slots of the gang's pod size).
	Quota map[string]int
	// Fallback says why a soft group sits above the tier it asked for ("" when it does not).
	Fallback string
}

// GroupCost is what the choice minimises for the required groups, in this order: the gang
// domain's tier, the sum of the groups' domain tiers (each group as tight as it can be), and the
// number of distinct lowest-tier HyperNodes the groups use.
type GroupCost struct {
	GangTier, TierSum, Leaves int
}

// Less orders costs lexicographically.
func (a GroupCost) Less(b GroupCost) bool {
	if a.GangTier != b.GangTier {
		return a.GangTier < b.GangTier
	}
	if a.TierSum != b.TierSum {
		return a.TierSum < b.TierSum
	}
	return a.Leaves < b.Leaves
}

// GroupChoice is the chosen gang domain and the domains of its groups.
type GroupChoice struct {
	*Choice
	Groups []GroupPlacement
	Cost   GroupCost
	// Exact is false when the search hit its budget and kept the best placement found so far.
	Exact bool
}

// ChooseGroups picks the gang's domain and, inside it, one HyperNode per group, together: the
// lowest tier at which some allowed gang domain holds every required group whole (each inside one
// HyperNode its own limit allows), then, within that tier, the gang domain and group domains with
// the least GroupCost (ties: the least room left in the gang domain, then names). Rooms are counted
// in pods of Demand.Pods[0] per node; a set of group domains is feasible when every HyperNode has
// room for the pods of the groups placed inside it (Hall's condition, exact on a tree). The search is
// an exact branch and bound over the groups, biggest first, with interchangeable sibling domains
// tried once, bounded by SearchBudget. The error is an *Unsatisfiable.
func ChooseGroups(t topology.Tree, nodes []fwk.NodeInfo, req GroupRequest) (*GroupChoice, error) {
	if len(req.Demand.Pods) != 1 {
		return nil, &Unsatisfiable{Msg: "no pod size to count rooms in"}
	}
	var need int64
	for _, g := range req.Groups {
		if g.Required {
			need += int64(g.Pods)
		}
	}
	base := req.Request
	base.Demand.Eligible, base.Demand.Min = nil, nil
	c := newChooser(t, base, len(nodes))
	c.need = max(need, 1)
	c.measure(nodes)
	if err := c.podTooBig(); err != nil {
		return nil, err
	}
	s := &groupSearch{c: c, t: t, req: req, budget: req.SearchBudget}
	if s.budget <= 0 {
		s.budget = 50000
	}
	s.lowest = t.Root().Tier
	if tiers := t.Tiers(); len(tiers) > 0 {
		s.lowest = tiers[0]
	}
	var gangs [][]*topology.HyperNode
	anchor, err := c.anchor()
	if !req.Topology {
		gangs = [][]*topology.HyperNode{{t.Root()}}
	} else {
		if err != nil {
			return nil, err
		}
		for _, tier := range t.Tiers() {
			if numericLimit(req.Limit) && tier > req.Limit.Tier {
				break
			}
			cands := c.tierCandidates(tier, anchor)
			if req.Limit.Hard {
				cands = allowedOnly(req.Limit, cands)
			}
			gangs = append(gangs, cands)
		}
		if Allows(req.Limit, t.Root()) {
			gangs = append(gangs, []*topology.HyperNode{t.Root()})
		}
	}
	var notes []string
	for _, cands := range gangs {
		var fit []*topology.HyperNode
		for _, g := range cands {
			if c.rooms[g.Index] >= need {
				fit = append(fit, g)
			}
		}
		if len(cands) > 0 && len(fit) == 0 {
			best := cands[0]
			for _, g := range cands {
				if c.rooms[g.Index] > c.rooms[best.Index] {
					best = g
				}
			}
			notes = append(notes, fmt.Sprintf("no tier-%d domain has room for the %s of the required sub-groups (the best: %s)", cands[0].Tier, podCount(need), c.roomNote(display(best), best.Index)))
			continue
		}
		sort.Slice(fit, func(i, j int) bool {
			ri, rj := c.rooms[fit[i].Index], c.rooms[fit[j].Index]
			if ri != rj {
				return ri < rj
			}
			return fit[i].Name < fit[j].Name
		})
		var best *GroupChoice
		var bestG *topology.HyperNode
		var why string
		for i, g := range fit {
			if i >= c.maxCand {
				break
			}
			var cutoff *GroupCost
			if best != nil {
				cutoff = &best.Cost
			}
			gc, no := s.within(g, cutoff)
			if gc == nil {
				if why == "" {
					why = no
				}
				continue
			}
			if best == nil || gc.Cost.Less(best.Cost) {
				best, bestG = gc, g
			}
		}
		if best != nil {
			best.Choice = s.choiceFor(bestG, best.Groups)
			best.Choice.Groups = best.Groups
			return best, nil
		}
		if len(fit) > 0 {
			notes = append(notes, fmt.Sprintf("no tier-%d domain holds every required sub-group whole (%d checked; %s)", fit[0].Tier, min(len(fit), c.maxCand), why))
		}
	}
	if len(notes) == 0 {
		notes = append(notes, "no domain the gang's networkTopology allows")
	}
	if req.Topology && !Allows(req.Limit, t.Root()) {
		notes = append(notes, fmt.Sprintf("nothing above allowed (%s)", req.Limit.Describe))
	}
	total := make(vector, len(c.p.names))
	for i, v := range c.p.pods[0] {
		total[i] = v * need
	}
	what := fmt.Sprintf("%d more pods needing %s", need, c.p.amounts(total))
	if need == 1 {
		what = "1 more pod needing " + c.p.amounts(total)
	}
	return nil, &Unsatisfiable{Msg: fmt.Sprintf("%s in %d required sub-group(s): %s", what, requiredCount(req.Groups), strings.Join(notes, "; ")),
		Placement: s.placement(gangs, need, total)}
}

// placement is the failure in numbers (gangcontract.Placement): per allowed tier the gang domain
// with the most room (BindingSubGroups when it has room for the pods but not for the sub-groups
// whole), and, for required sub-groups of one size and limit, how many of them each gang domain
// with room for their pods holds whole.
func (s *groupSearch) placement(gangs [][]*topology.HyperNode, need int64, total vector) *gangcontract.Placement {
	c := s.c
	out := &gangcontract.Placement{Version: gangcontract.PlacementVersion, Need: c.amounts(need, total)}
	var fit []*topology.HyperNode
	for _, cands := range gangs {
		if len(cands) == 0 {
			continue
		}
		tp := gangcontract.TierPlacement{Tier: cands[0].Tier, Allowed: true, Candidates: len(cands)}
		best := cands[0]
		for _, g := range cands {
			if c.rooms[g.Index] > c.rooms[best.Index] {
				best = g
			}
			if c.rooms[g.Index] >= need {
				fit = append(fit, g)
				tp.Evaluated++
			}
		}
		tp.Evaluated = min(tp.Evaluated, c.maxCand)
		c.describeDomain(&tp, best)
		if tp.BestRoom >= need {
			tp.Binding = gangcontract.BindingSubGroups
		}
		out.Tiers = append(out.Tiers, tp)
	}
	sp := &gangcontract.SubGroupPlacement{}
	var first *Group
	uniform := true
	for i := range s.req.Groups {
		g := &s.req.Groups[i]
		if !g.Required || g.Pods <= 0 {
			continue
		}
		if !g.Topology {
			continue
		}
		sp.Required++
		if first == nil {
			first = g
		} else if g.Pods != first.Pods || g.Limit.Describe != first.Limit.Describe || g.Limit.Hard != first.Limit.Hard {
			uniform = false
		}
	}
	if sp.Required == 0 {
		return out
	}
	out.SubGroups = sp
	if !uniform || !first.Limit.Hard {
		return out
	}
	sp.Size, sp.Limit = int64(first.Pods), first.Limit.Describe
	for _, g := range fit {
		held, rooms := s.holds(g, first.Limit, sp.Size)
		d := gangcontract.SubGroupDomain{HyperNode: g.Name, Tier: g.Tier, Holds: int(held)}
		if g.IsRoot() {
			d.HyperNode = topology.RootName
		}
		for i, r := range rooms {
			if i == 6 {
				break
			}
			d.Rooms = append(d.Rooms, gangcontract.NamedRoom{Name: r.Name, Room: r.Room})
		}
		sp.Domains = append(sp.Domains, d)
	}
	sort.SliceStable(sp.Domains, func(i, j int) bool {
		if sp.Domains[i].Holds != sp.Domains[j].Holds {
			return sp.Domains[i].Holds > sp.Domains[j].Holds
		}
		return sp.Domains[i].Tier < sp.Domains[j].Tier
	})
	if len(sp.Domains) > 5 {
		sp.Domains = sp.Domains[:5]
	}
	if len(sp.Domains) > 0 {
		sp.Holds = sp.Domains[0].Holds
	}
	return out
}

// holds counts the sub-groups of size pods that fit whole inside gangNode, each in one of the highest
// HyperNodes there that limit allows, one such HyperNode at a time, and lists those HyperNodes'
// rooms, roomiest first.
func (s *groupSearch) holds(gangNode *topology.HyperNode, limit gang.Limit, size int64) (int64, []gangcontract.NamedRoom) {
	var tops []*topology.HyperNode
	for _, h := range subtree(s.t, gangNode) {
		if !Allows(limit, h) {
			continue
		}
		if p := h.Parent; p != nil && gangNode.Contains(p) && Allows(limit, p) {
			continue
		}
		tops = append(tops, h)
	}
	var held int64
	rooms := make([]gangcontract.NamedRoom, 0, len(tops))
	for _, h := range tops {
		r := s.c.rooms[h.Index]
		held += r / size
		rooms = append(rooms, gangcontract.NamedRoom{Name: h.Name, Room: r})
	}
	sort.SliceStable(rooms, func(i, j int) bool {
		if rooms[i].Room != rooms[j].Room {
			return rooms[i].Room > rooms[j].Room
		}
		return rooms[i].Name < rooms[j].Name
	})
	return held, rooms
}

func requiredCount(gs []Group) int {
	n := 0
	for _, g := range gs {
		if g.Required && g.Topology {
			n++
		}
	}
	return n
}

// groupSearch is one ChooseGroups call's state.
type groupSearch struct {
	c      *chooser
	t      topology.Tree
	req    GroupRequest
	budget int
	lowest int
	// feasible: within only decides whether the required groups fit (GroupsFit), without the
	// optional groups' places or the quotas.
	feasible bool
}

// order is a group and the HyperNodes it may use inside one gang domain.
type order struct {
	g     int
	need  int64
	cands []*topology.HyperNode
	minT  int
	// same is the index of an earlier order with the same need and the same candidates (-1 when
	// none): interchangeable groups are given domains in candidate order only (pos), so each set of
	// their domains is searched once.
	same  int
	class int // the first order of its class of interchangeable groups
	pos   map[*topology.HyperNode]int
}

// within finds the best placement of the groups inside gang domain gangNode; nil and a reason when the
// required ones do not fit. With a cutoff (the best cost of an earlier gang domain), only placements
// that cost less are looked for: nil then also means none does.
func (s *groupSearch) within(gangNode *topology.HyperNode, cutoff *GroupCost) (*GroupChoice, string) {
	c := s.c
	sub := subtree(s.t, gangNode)
	var req, opt []order
	for i, g := range s.req.Groups {
		if g.Pods <= 0 {
			continue
		}
		o := order{g: i, need: int64(g.Pods)}
		var anchor *topology.HyperNode
		if len(g.Placed) > 0 {
			anchor = s.t.LCA(g.Placed)
			if !gangNode.Contains(anchor) {
				if g.Required {
					return nil, fmt.Sprintf("sub-group %s's placed pods are outside %s", g.Name, display(gangNode))
				}
				continue
			}
		}
		if !g.Topology {
			o.cands = []*topology.HyperNode{gangNode}
		} else {
			for _, h := range sub {
				if c.rooms[h.Index] < o.need || (g.Limit.Hard && !Allows(g.Limit, h)) || (anchor != nil && !h.Contains(anchor)) {
					continue
				}
				o.cands = append(o.cands, h)
			}
		}
		if len(o.cands) == 0 {
			if g.Required {
				return nil, fmt.Sprintf("sub-group %s (%d pods, %s) fits no HyperNode inside %s", g.Name, g.Pods, g.Limit.Describe, display(gangNode))
			}
			continue
		}
		o.minT = o.cands[0].Tier
		for _, h := range o.cands {
			o.minT = min(o.minT, h.Tier)
		}
		if g.Required {
			req = append(req, o)
		} else {
			opt = append(opt, o)
		}
	}
	sort.SliceStable(req, func(i, j int) bool { return req[i].need > req[j].need })
	markSame(req)
	b := &bb{s: s, gangNode: gangNode, orders: req, load: map[*topology.HyperNode]int64{}, leafUse: map[*topology.HyperNode]int{},
		pick: make([]*topology.HyperNode, len(req)), budget: s.budget, cutoff: cutoff}
	b.rest = make([]int, len(req)+1)
	b.restLeaf = make([]int64, len(req)+1)
	for i := len(req) - 1; i >= 0; i-- {
		b.rest[i] = b.rest[i+1] + req[i].minT
		b.restLeaf[i] = b.restLeaf[i+1]
		if req[i].minT == s.lowest {
			b.restLeaf[i] += req[i].need
		}
	}
	b.classLeft = make([]int, len(req))
	for k := range req {
		for j := k; j < len(req); j++ {
			if req[j].class == req[k].class {
				b.classLeft[k]++
			}
		}
	}
	b.restGroups = make([]int, len(req)+1)
	for i := len(req) - 1; i >= 0; i-- {
		b.restGroups[i] = b.restGroups[i+1]
		if req[i].minT == s.lowest {
			b.restGroups[i]++
			if b.unit == 0 || b.unit == req[i].need {
				b.unit = req[i].need
			} else {
				b.unit = -1
			}
		}
	}
	var caps []int
	for _, h := range sub {
		if h.Tier == s.lowest && !h.IsRoot() {
			b.leafRoom = max(b.leafRoom, c.rooms[h.Index])
			if b.unit > 0 {
				caps = append(caps, int(c.rooms[h.Index]/b.unit))
			}
		}
	}
	if b.unit > 0 {
		sort.Sort(sort.Reverse(sort.IntSlice(caps)))
		b.capPrefix = make([]int, len(caps)+1)
		for i, n := range caps {
			b.capPrefix[i+1] = b.capPrefix[i] + n
		}
	} else {
		b.unit = 0
	}
	b.dfs(0, 0)
	if b.best == nil {
		if cutoff != nil || s.feasible {
			return nil, ""
		}
		return nil, s.shortfall(gangNode, req)
	}
	if s.feasible {
		return &GroupChoice{Cost: b.bestCost}, ""
	}
	// Replay the best placement, then add the optional groups where they fit.
	b.load, b.leafUse = map[*topology.HyperNode]int64{}, map[*topology.HyperNode]int{}
	dom := make([]*topology.HyperNode, len(s.req.Groups))
	for k, o := range req {
		dom[o.g] = b.best[k]
		b.add(b.best[k], o.need, 1)
	}
	sort.SliceStable(opt, func(i, j int) bool { return opt[i].g < opt[j].g })
	for _, o := range opt {
		for _, h := range b.sorted(o.cands, o.need, 1) {
			if b.fits(h, o.need) {
				dom[o.g] = h
				b.add(h, o.need, 1)
				break
			}
		}
	}
	gc := &GroupChoice{Cost: GroupCost{GangTier: gangNode.Tier, TierSum: b.bestCost.TierSum, Leaves: b.bestCost.Leaves}, Exact: b.budget > 0}
	gc.Groups = s.quotas(dom)
	return gc, ""
}

// GroupsFit reports whether the required groups fit whole inside gangNode when each of its nodes
// has rooms[node] slots (pods of the gang's one pod size; nodes not listed have none): the
// feasibility test of ChooseGroups (the same search, each group inside one HyperNode its limit
// allows and containing its placed pods, Hall's condition on the tree), for a caller that counts the
// rooms itself, such as the preemption search's what-if of a victim set. budget bounds the search
// (<= 0: 50,000); a search that runs out reports false.
func GroupsFit(t topology.Tree, gangNode *topology.HyperNode, rooms map[string]int64, groups []Group, budget int) bool {
	c := &chooser{t: t, nh: t.Len()}
	c.rooms = make([]int64, c.nh+1)
	for name, r := range rooms {
		if r <= 0 {
			continue
		}
		c.rooms[c.nh] += r
		for _, h := range t.Containers(name) {
			c.rooms[h.Index] += r
		}
	}
	s := &groupSearch{c: c, t: t, req: GroupRequest{Groups: groups}, budget: budget, feasible: true}
	if s.budget <= 0 {
		s.budget = 50000
	}
	s.lowest = t.Root().Tier
	if tiers := t.Tiers(); len(tiers) > 0 {
		s.lowest = tiers[0]
	}
	gc, _ := s.within(gangNode, nil)
	return gc != nil
}

// markSame links each order to the last earlier one with the same need and candidates.
func markSame(req []order) {
	for k := range req {
		req[k].same, req[k].class = -1, k
		for j := k - 1; j >= 0; j-- {
			if req[j].need == req[k].need && sameNodes(req[j].cands, req[k].cands) {
				req[k].same, req[k].pos, req[k].class = j, req[j].pos, req[j].class
				break
			}
		}
		if req[k].same < 0 {
			req[k].pos = make(map[*topology.HyperNode]int, len(req[k].cands))
			for i, h := range req[k].cands {
				req[k].pos[h] = i
			}
		}
	}
}

func sameNodes(a, b []*topology.HyperNode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// subtree lists gangNode and every HyperNode below it.
func subtree(t topology.Tree, gangNode *topology.HyperNode) []*topology.HyperNode {
	if gangNode.IsRoot() {
		return append(append([]*topology.HyperNode(nil), t.List()...), gangNode)
	}
	out := []*topology.HyperNode{gangNode}
	for i := 0; i < len(out); i++ {
		out = append(out, out[i].Children...)
	}
	return out
}

// bb is the branch and bound over the required groups.
type bb struct {
	s        *groupSearch
	gangNode *topology.HyperNode
	orders   []order
	rest     []int // rest[k]: the least tier sum of groups k.. (their lowest candidate tiers)
	// restLeaf[k]: the pods of groups k.. whose lowest candidate tier is the lowest tier; leafRoom:
	// the most room of one lowest-tier HyperNode inside gangNode. Together they bound the leaves a
	// completion at the least tier sum still has to open.
	restLeaf []int64
	leafRoom int64
	// When every group bound for the lowest tier has one size (unit pods; 0 otherwise), the bound
	// counts whole groups instead: restGroups[k] of them are left, and capPrefix[m] is how many
	// the m roomiest lowest-tier HyperNodes hold.
	classLeft  []int // classLeft[k]: groups k.. interchangeable with group k, itself included
	unit       int64
	restGroups []int
	capPrefix  []int
	done       bool // the best found has the least cost possible
	cutoff     *GroupCost
	load       map[*topology.HyperNode]int64
	leafUse    map[*topology.HyperNode]int
	leaves     int
	pick       []*topology.HyperNode

	best     []*topology.HyperNode
	bestCost GroupCost
	budget   int
}

// fits reports whether need more pods in h keep every HyperNode from h up to gangNode within its room.
func (b *bb) fits(h *topology.HyperNode, need int64) bool {
	for a := h; a != nil; a = a.Parent {
		if b.load[a]+need > b.s.c.rooms[a.Index] {
			return false
		}
		if a == b.gangNode {
			return true
		}
	}
	return true
}

// add books (sign 1) or unbooks (-1) need pods in h.
func (b *bb) add(h *topology.HyperNode, need int64, sign int) {
	for a := h; a != nil; a = a.Parent {
		b.load[a] += int64(sign) * need
		if a == b.gangNode {
			break
		}
	}
	if h.Tier == b.s.lowest && !h.IsRoot() {
		b.leafUse[h] += sign
		if sign > 0 && b.leafUse[h] == 1 {
			b.leaves++
		} else if sign < 0 && b.leafUse[h] == 0 {
			b.leaves--
		}
	}
}

// sorted orders candidates: lowest tier first, then lowest-tier HyperNodes already in use (they add
// no domain), then the most groups of need pods each holds of the class (left of them, this one
// included; so interchangeable groups fill the HyperNodes holding several of them first and reach
// the fewest leaves at once), then the least room left (best fit), then name; of unused sibling leaves (no
// children) with the same room only the first is kept: they are interchangeable. HyperNodes with
// children are all kept, since the same room may be split differently below them.
func (b *bb) sorted(cands []*topology.HyperNode, need int64, left int) []*topology.HyperNode {
	type key struct {
		parent *topology.HyperNode
		room   int64
	}
	seen := map[key]bool{}
	out := make([]*topology.HyperNode, 0, len(cands))
	for _, h := range cands {
		if b.load[h] == 0 && len(h.Children) == 0 {
			k := key{h.Parent, b.s.c.rooms[h.Index]}
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, h)
	}
	rooms := b.s.c.rooms
	sort.SliceStable(out, func(i, j int) bool {
		hi, hj := out[i], out[j]
		if hi.Tier != hj.Tier {
			return hi.Tier < hj.Tier
		}
		ui, uj := b.load[hi] > 0, b.load[hj] > 0
		if ui != uj {
			return ui
		}
		li, lj := rooms[hi.Index]-b.load[hi], rooms[hj.Index]-b.load[hj]
		if ci, cj := min(li/need, int64(left)), min(lj/need, int64(left)); ci != cj {
			return ci > cj
		}
		if li != lj {
			return li < lj
		}
		return hi.Name < hj.Name
	})
	return out
}

// lowerBound is the least cost of any completion of the first k groups' domains: the groups left
// at their lowest tiers, and those of them bound for the lowest tier in the room left in the leaves
// already used, then in the biggest leaves.
func (b *bb) lowerBound(k, tierSum int) GroupCost {
	lb := GroupCost{GangTier: b.gangNode.Tier, TierSum: tierSum + b.rest[k], Leaves: b.leaves}
	if left := b.restGroups[k]; b.unit > 0 && left > 0 {
		for h, n := range b.leafUse {
			if n > 0 {
				left -= int(max(b.s.c.rooms[h.Index]-b.load[h], 0) / b.unit)
			}
		}
		if left > 0 {
			// The fewest lowest-tier HyperNodes holding left more groups (used ones counted at their
			// full room: still a lower bound).
			m := sort.SearchInts(b.capPrefix, left)
			lb.Leaves += m
		}
		return lb
	}
	if need := b.restLeaf[k]; need > 0 && b.leafRoom > 0 {
		for h, n := range b.leafUse {
			if n > 0 {
				need -= max(b.s.c.rooms[h.Index]-b.load[h], 0)
			}
		}
		if need > 0 {
			lb.Leaves += int((need + b.leafRoom - 1) / b.leafRoom)
		}
	}
	return lb
}

func (b *bb) dfs(k, tierSum int) {
	if b.budget <= 0 || b.done {
		return
	}
	b.budget--
	if b.best != nil || b.cutoff != nil {
		lb := b.lowerBound(k, tierSum)
		if (b.best != nil && !lb.Less(b.bestCost)) || (b.cutoff != nil && !lb.Less(*b.cutoff)) {
			return
		}
	}
	if k == len(b.orders) {
		// make, not append to nil: with no required group the empty placement is a valid best
		// (a gang whose minimum is already placed still places its optional sub-groups).
		b.best = make([]*topology.HyperNode, len(b.pick))
		copy(b.best, b.pick)
		b.bestCost = GroupCost{GangTier: b.gangNode.Tier, TierSum: tierSum, Leaves: b.leaves}
		// Nothing can beat the bound of the empty placement: stop.
		saved := b.leafUse
		b.leafUse, b.leaves = nil, 0
		if !b.lowerBound(0, 0).Less(b.bestCost) {
			b.done = true
		}
		b.leafUse, b.leaves = saved, b.bestCost.Leaves
		return
	}
	o := b.orders[k]
	cands := o.cands
	if o.same >= 0 {
		// Interchangeable with an earlier group: a domain no earlier in candidate order than its.
		from := o.pos[b.pick[o.same]]
		cands = cands[from:]
	}
	for _, h := range b.sorted(cands, o.need, b.classLeft[k]) {
		if !b.fits(h, o.need) {
			continue
		}
		b.pick[k] = h
		b.add(h, o.need, 1)
		b.dfs(k+1, tierSum+h.Tier)
		b.add(h, o.need, -1)
		if b.budget <= 0 {
			return
		}
	}
}

// quotas turns the groups' domains into pods per node: groups in lower-tier domains first (every
// group inside a domain is then served before one in the domain itself, so Hall's condition makes
// this succeed), each filling the nodes of the roomiest lowest-tier HyperNodes first.
func (s *groupSearch) quotas(dom []*topology.HyperNode) []GroupPlacement {
	c := s.c
	out := make([]GroupPlacement, len(s.req.Groups))
	idx := make([]int, 0, len(dom))
	for i, h := range dom {
		out[i].Name = s.req.Groups[i].Name
		if h != nil {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return dom[idx[a]].Tier < dom[idx[b]].Tier })
	used := map[string]int64{}
	for _, i := range idx {
		h, g := dom[i], s.req.Groups[i]
		gp := &out[i]
		gp.Placed, gp.HyperNode, gp.Tier, gp.Root = true, h.Name, h.Tier, h.IsRoot()
		gp.Quota = map[string]int{}
		var names []string
		if h.IsRoot() {
			c.eachNode(func(n string) { names = append(names, n) })
		} else {
			names = h.NodeNames()
		}
		left := func(n string) int64 { return c.slotsOf(n) - used[n] }
		// The group's lowest-tier HyperNodes by room left, so a group above the lowest tier still
		// spans as few of them as it can.
		leafLeft := map[*topology.HyperNode]int64{}
		leafOf := func(n string) *topology.HyperNode {
			var l *topology.HyperNode
			for _, a := range s.t.Containers(n) {
				if l == nil || a.Tier < l.Tier {
					l = a
				}
			}
			return l
		}
		for _, n := range names {
			leafLeft[leafOf(n)] += max(left(n), 0)
		}
		sort.SliceStable(names, func(a, b int) bool {
			la, lb := leafOf(names[a]), leafOf(names[b])
			if la != lb && leafLeft[la] != leafLeft[lb] {
				return leafLeft[la] > leafLeft[lb]
			}
			return names[a] < names[b]
		})
		need := int64(g.Pods)
		for _, n := range names {
			if need == 0 {
				break
			}
			if l := min(left(n), need); l > 0 {
				gp.Quota[n] = int(l)
				used[n] += l
				need -= l
			}
		}
		if g.Topology && !g.Limit.Hard && !Allows(g.Want, h) {
			gp.Fallback = fmt.Sprintf("sub-group %s (soft, wants %s) placed in %s (tier %d): no HyperNode it asked for had room for its %s beside the other sub-groups",
				g.Name, g.Want.Describe, display(h), h.Tier, podCount(int64(g.Pods)))
		}
	}
	return out
}

// choiceFor is the gang-level Choice: domain gangNode, its nodes narrowed to those the groups use.
func (s *groupSearch) choiceFor(gangNode *topology.HyperNode, gs []GroupPlacement) *Choice {
	c := s.c
	ch := &Choice{HyperNode: gangNode.Name, Tier: gangNode.Tier, Root: gangNode.IsRoot(), Need: int(c.need), Room: int(c.rooms[gangNode.Index]), Evaluated: c.evaluated,
		Nodes: sets.New[string]()}
	for _, g := range gs {
		for n := range g.Quota {
			ch.Nodes.Insert(n)
		}
	}
	ch.Rooms = make([]int32, len(c.rooms))
	for i, r := range c.rooms {
		ch.Rooms[i] = int32(min(r, math.MaxInt32))
	}
	return ch
}

// shortfall explains why the required groups do not fit inside gangNode, in numbers for the usual case
// (groups of one size and limit): how many of them the HyperNodes their limit allows hold, one at a
// time, e.g. "HyperNode spine-0 holds 3 of the 4 required sub-groups of 8 pods (highestTierAllowed=1:
// rack-0 has room for 15, rack-1 for 23)".
func (s *groupSearch) shortfall(gangNode *topology.HyperNode, req []order) string {
	generic := fmt.Sprintf("the required sub-groups do not fit whole inside %s", display(gangNode))
	if len(req) == 0 {
		return generic
	}
	first := s.req.Groups[req[0].g]
	for _, o := range req {
		g := s.req.Groups[o.g]
		if !g.Topology || !g.Limit.Hard || o.need != req[0].need || g.Limit.Describe != first.Limit.Describe {
			return generic
		}
	}
	// The highest HyperNodes inside gangNode the limit allows: each holds room/size groups.
	var tops []*topology.HyperNode
	for _, h := range subtree(s.t, gangNode) {
		if !Allows(first.Limit, h) {
			continue
		}
		if p := h.Parent; p != nil && gangNode.Contains(p) && Allows(first.Limit, p) {
			continue
		}
		tops = append(tops, h)
	}
	sort.Slice(tops, func(i, j int) bool { return tops[i].Name < tops[j].Name })
	var held int64
	var parts []string
	for i, h := range tops {
		r := s.c.rooms[h.Index]
		held += r / req[0].need
		if i < 6 {
			parts = append(parts, fmt.Sprintf("%s has room for %d", h.Name, r))
		}
	}
	if len(tops) > 6 {
		parts = append(parts, fmt.Sprintf("... (%d HyperNodes)", len(tops)))
	}
	return fmt.Sprintf("%s holds %d of the %d required sub-groups of %s (%s: %s)", display(gangNode), held, len(req), podCount(req[0].need), first.Limit.Describe, strings.Join(parts, ", "))
}
