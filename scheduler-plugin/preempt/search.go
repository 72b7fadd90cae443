package preempt

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// search holds one Choose call's measured nodes and units.
type search struct {
	t     topology.Tree
	req   Request
	names []corev1.ResourceName
	shape []int64 // the largest pod's request per resource: rooms are counted in it (conservative)
	floor []int64 // minResources floor, nil for none
	need  int64
	// groups are the preemptor's sub-groups (nil: a flat gang); groupBudget bounds each
	// domain.GroupsFit search.
	groups      []domain.Group
	groupBudget int

	byName  map[string]int
	free    [][]int64 // per node
	pods    []int64   // free pod slots per node
	usable  []bool    // eligible and not held
	nodeSet []string  // node names by index

	units   []*unit
	unitsOn [][]*unit // per node index, the units with a pod there

	maxCand, budget int
	domains         int
	searched        int
}

// unit is a Unit with its pods' requests per node index.
type unit struct {
	*Unit
	freed map[int][]int64 // node index → resources freed (last entry: pod count)
	cost  Cost            // cost of this unit alone (PDB, pods, run time)
	stamp int             // the last domain that listed it (dedup)
	order int             // its place in the caller's list: the order budgets are charged in
	pdb   bool            // some pod counts against a budget
}

func newSearch(t topology.Tree, nodes []fwk.NodeInfo, units []*Unit, req Request) *search {
	s := &search{t: t, req: req, byName: make(map[string]int, len(nodes)), maxCand: req.MaxCandidatesPerTier, budget: req.Budget}
	if s.maxCand <= 0 {
		s.maxCand = 64
	}
	if s.budget <= 0 {
		s.budget = 4096
	}
	seen := map[corev1.ResourceName]bool{}
	add := func(rl corev1.ResourceList) {
		for n := range rl {
			if !seen[n] {
				seen[n] = true
				s.names = append(s.names, n)
			}
		}
	}
	for _, p := range req.Pods {
		add(p)
	}
	add(req.Min)
	sort.Slice(s.names, func(i, j int) bool { return s.names[i] < s.names[j] })
	s.shape = make([]int64, len(s.names))
	for _, p := range req.Pods {
		v := s.vec(p)
		for i := range v {
			s.shape[i] = max(s.shape[i], v[i])
		}
	}
	if len(req.Min) > 0 {
		s.floor = s.vec(req.Min)
	}
	s.need = int64(len(req.Pods))
	if len(req.Groups) > 0 {
		s.groups, s.groupBudget = req.Groups, groupSearchBudget
		s.need = 0
		for _, g := range req.Groups {
			if g.Required {
				s.need += int64(g.Pods)
			}
		}
		s.need = max(s.need, 1)
	}
	k := len(s.names)
	for i, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		s.byName[n.Name] = i
		s.nodeSet = append(s.nodeSet, n.Name)
		f := make([]int64, k)
		podsFree := domain.NodeFree(ni, s.names, f)
		s.free = append(s.free, f)
		s.pods = append(s.pods, podsFree)
		s.usable = append(s.usable, !req.Held.Has(n.Name) && (req.Eligible == nil || req.Eligible(n)))
	}
	// byName must index s.free: rebuild it over the kept nodes.
	for i, name := range s.nodeSet {
		s.byName[name] = i
	}
	for i, u := range units {
		x := &unit{Unit: u, freed: map[int][]int64{}, order: i}
		held := false
		for _, p := range u.Pods {
			if req.Held.Has(p.Node) {
				held = true
				break
			}
			x.cost.Pods++
			if len(p.Budgets) > 0 {
				x.pdb = true
			}
			if !p.Started.IsZero() && req.Now.After(p.Started) {
				x.cost.RunTime += req.Now.Sub(p.Started)
			}
			idx, ok := s.byName[p.Node]
			if !ok {
				continue
			}
			f := x.freed[idx]
			if f == nil {
				f = make([]int64, k+1)
				x.freed[idx] = f
			}
			v := s.vec(p.Requests)
			for j := range v {
				f[j] += v[j]
			}
			f[k]++
		}
		if !held { // a unit with pods on another preemptor's held nodes is that preemptor's victim
			x.cost.PDBViolations = s.pdbViolations([]*unit{x})
			s.units = append(s.units, x)
		}
	}
	s.unitsOn = make([][]*unit, len(s.nodeSet))
	for _, u := range s.units {
		for idx := range u.freed {
			s.unitsOn[idx] = append(s.unitsOn[idx], u)
		}
	}
	return s
}

func (s *search) vec(rl corev1.ResourceList) []int64 { return domain.Amounts(s.names, rl) }

// slots is how many pods of the gang's shape fit into free with pods free pod slots.
func (s *search) slots(free []int64, pods int64) int64 { return domain.Slots(s.shape, free, pods) }

// dom is one candidate domain being evaluated.
type dom struct {
	h     *topology.HyperNode
	in    func(idx int) bool
	base  int64   // slots with no victim
	nodes []int   // the usable nodes' indexes
	agg   []int64 // summed free capacity (only with a floor)
	units []*unit // candidate victims with a pod on a usable node of the domain
	best  []*unit
	cost  Cost
	exact bool
}

// bestIn returns the cheapest domain of one tier, nil when none can be cleared.
func (s *search) bestIn(hs []*topology.HyperNode) *Result {
	var feasible []*dom
	for _, h := range hs {
		d := s.domain(h)
		if !d.fits(s, d.units) {
			continue
		}
		d.best = d.greedy(s)
		d.cost = s.costOf(d.best)
		feasible = append(feasible, d)
	}
	if len(feasible) == 0 {
		return nil
	}
	sort.SliceStable(feasible, func(i, j int) bool { return lessDom(feasible[i], feasible[j]) })
	for i, d := range feasible {
		if i >= s.maxCand {
			break
		}
		s.searched++
		d.exact = d.branchAndBound(s)
	}
	sort.SliceStable(feasible, func(i, j int) bool { return lessDom(feasible[i], feasible[j]) })
	d := feasible[0]
	r := &Result{HyperNode: d.h.Name, Tier: d.h.Tier, Root: d.h.IsRoot(), Cost: d.cost, Exact: d.exact,
		Freed: map[string]domain.Freed{}, Domains: s.domains, Searched: s.searched}
	k := len(s.names)
	for _, u := range d.best {
		r.Victims = append(r.Victims, u.Unit)
		for idx, f := range u.freed {
			name := s.nodeSet[idx]
			fr := r.Freed[name]
			if fr.Resources == nil {
				fr.Resources = corev1.ResourceList{}
			}
			for _, p := range u.Pods {
				if p.Node != name {
					continue
				}
				for rn, q := range p.Requests {
					v := fr.Resources[rn]
					v.Add(q)
					fr.Resources[rn] = v
				}
			}
			fr.Pods += int(f[k])
			r.Freed[name] = fr
		}
	}
	sort.Slice(r.Victims, func(i, j int) bool { return r.Victims[i].Key < r.Victims[j].Key })
	return r
}

func lessDom(a, b *dom) bool {
	if a.cost.Less(b.cost) {
		return true
	}
	if b.cost.Less(a.cost) {
		return false
	}
	return a.h.Name < b.h.Name
}

func (s *search) domain(h *topology.HyperNode) *dom {
	d := &dom{h: h}
	if h.IsRoot() {
		d.in = func(idx int) bool { return s.usable[idx] }
	} else {
		d.in = func(idx int) bool { return s.usable[idx] && h.HasNode(s.nodeSet[idx]) }
	}
	if s.floor != nil {
		d.agg = make([]int64, len(s.names))
	}
	s.domains++ // also the dedup stamp of this domain's units
	visit := func(idx int) {
		if !s.usable[idx] {
			return
		}
		for _, u := range s.unitsOn[idx] {
			if u.stamp != s.domains {
				u.stamp = s.domains
				d.units = append(d.units, u)
			}
		}
		d.nodes = append(d.nodes, idx)
		d.base += s.slots(s.free[idx], s.pods[idx])
		for j := range d.agg {
			d.agg[j] += max(s.free[idx][j], 0)
		}
	}
	if h.IsRoot() {
		for idx := range s.nodeSet {
			visit(idx)
		}
	} else {
		h.EachNode(func(name string) {
			if idx, ok := s.byName[name]; ok {
				visit(idx)
			}
		})
	}
	// Most expensive first: the greedy drops them first and the exact search decides them first.
	sort.SliceStable(d.units, func(i, j int) bool {
		a, b := d.units[i], d.units[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.cost.PDBViolations != b.cost.PDBViolations {
			return a.cost.PDBViolations > b.cost.PDBViolations
		}
		if a.cost.Pods != b.cost.Pods {
			return a.cost.Pods > b.cost.Pods
		}
		if a.cost.RunTime != b.cost.RunTime {
			return a.cost.RunTime > b.cost.RunTime
		}
		return a.Key < b.Key
	})
	return d
}

// addFreed adds what u frees on the domain's nodes to extra (per node index: k resources, then the
// pod count) and to agg (the domain's aggregate; nil keeps none).
func (d *dom) addFreed(u *unit, k int, extra map[int][]int64, agg []int64) {
	for idx, f := range u.freed {
		if !d.in(idx) {
			continue
		}
		e := extra[idx]
		if e == nil {
			e = make([]int64, k+1)
			extra[idx] = e
		}
		for j := range f {
			e[j] += f[j]
		}
		for j := range agg {
			agg[j] += f[j]
		}
	}
}

// fits reports whether the gang fits the domain with the units evicted.
func (d *dom) fits(s *search, set []*unit) bool {
	k := len(s.names)
	extra := map[int][]int64{}
	var aggExtra []int64
	if d.agg != nil {
		aggExtra = make([]int64, k)
	}
	for _, u := range set {
		d.addFreed(u, k, extra, aggExtra)
	}
	total := d.base
	buf := make([]int64, k)
	for idx, e := range extra {
		for j := range buf {
			buf[j] = s.free[idx][j] + e[j]
		}
		total += s.slots(buf, s.pods[idx]+e[k]) - s.slots(s.free[idx], s.pods[idx])
	}
	if total < s.need {
		return false
	}
	for j := range aggExtra {
		if d.agg[j]+aggExtra[j] < s.floor[j] {
			return false
		}
	}
	return s.groups == nil || d.groupsFit(s, extra)
}

// groupSearchBudget bounds each sub-group feasibility search of a victim set (search nodes).
const groupSearchBudget = 20000

// groupsFit reports whether the preemptor's required sub-groups fit whole inside the domain with
// extra (per node index: resources, then pods) freed: the domain chooser's own test.
func (d *dom) groupsFit(s *search, extra map[int][]int64) bool {
	k := len(s.names)
	rooms := make(map[string]int64, len(d.nodes))
	buf := make([]int64, k)
	for _, idx := range d.nodes {
		pods := s.pods[idx]
		copy(buf, s.free[idx])
		if e := extra[idx]; e != nil {
			for j := range buf {
				buf[j] += e[j]
			}
			pods += e[k]
		}
		if r := s.slots(buf, pods); r > 0 {
			rooms[s.nodeSet[idx]] = r
		}
	}
	return domain.GroupsFit(s.t, d.h, rooms, s.groups, s.groupBudget)
}

// greedy starts from every candidate and drops the most expensive ones while the gang still fits:
// a set minimal by inclusion, the upper bound of the exact search. It keeps running totals, so it
// costs O(the candidates' pods).
func (d *dom) greedy(s *search) []*unit {
	k := len(s.names)
	extra := map[int][]int64{}
	agg := append([]int64(nil), d.agg...)
	for _, u := range d.units {
		d.addFreed(u, k, extra, agg)
	}
	slotsWith := func(idx int, e []int64, sign int64, f []int64) int64 {
		buf := make([]int64, k)
		for j := range buf {
			buf[j] = s.free[idx][j] + e[j]
			if f != nil {
				buf[j] += sign * f[j]
			}
		}
		pods := s.pods[idx] + e[k]
		if f != nil {
			pods += sign * f[k]
		}
		return s.slots(buf, pods)
	}
	total := d.base
	for idx, e := range extra {
		total += slotsWith(idx, e, 0, nil) - s.slots(s.free[idx], s.pods[idx])
	}
	var keep []*unit
	for _, u := range d.units {
		delta := int64(0)
		ok := true
		for idx, f := range u.freed {
			if d.in(idx) {
				delta += slotsWith(idx, extra[idx], -1, f) - slotsWith(idx, extra[idx], 0, nil)
			}
		}
		if total+delta < s.need {
			ok = false
		}
		if ok && agg != nil {
			for j := range agg {
				var sub int64
				for idx, f := range u.freed {
					if d.in(idx) {
						sub += f[j]
					}
				}
				if agg[j]-sub < s.floor[j] {
					ok = false
				}
			}
		}
		if ok && s.groups != nil {
			// Without u (and the units already dropped), do the sub-groups still fit whole?
			without := make(map[int][]int64, len(extra))
			for idx, e := range extra {
				without[idx] = append([]int64(nil), e...)
			}
			for idx, f := range u.freed {
				if d.in(idx) {
					for j := range f {
						without[idx][j] -= f[j]
					}
				}
			}
			ok = d.groupsFit(s, without)
		}
		if !ok {
			keep = append(keep, u)
			continue
		}
		total += delta
		for idx, f := range u.freed {
			if !d.in(idx) {
				continue
			}
			for j := range f {
				extra[idx][j] -= f[j]
			}
			for j := range agg {
				agg[j] -= f[j]
			}
		}
	}
	return keep
}

// exactLimit is the most candidate victims a domain may have for the exact search; beyond it the
// greedy set stands (Result.Exact false).
const exactLimit = 48

// branchAndBound improves d.best to the least-cost set, deciding units most expensive first
// (leave it, then evict it). A branch stops when its cost is no less than the best (costs only grow
// as units are added), when even evicting every undecided unit does not make room, or when the
// set already makes room. It reports false when the budget ran out first.
func (d *dom) branchAndBound(s *search) bool {
	if len(d.units) > exactLimit {
		return false
	}
	visits := 0
	exact := true
	var chosen []*unit
	var rec func(i int)
	rec = func(i int) {
		if !exact {
			return
		}
		if visits++; visits > s.budget {
			exact = false
			return
		}
		c := s.costOf(chosen)
		if !c.Less(d.cost) {
			return
		}
		if d.fits(s, chosen) {
			d.best, d.cost = append([]*unit(nil), chosen...), c
			return
		}
		if i == len(d.units) || !d.fits(s, append(append([]*unit(nil), chosen...), d.units[i:]...)) {
			return
		}
		rec(i + 1)
		chosen = append(chosen, d.units[i])
		rec(i + 1)
		chosen = chosen[:len(chosen)-1]
	}
	rec(0)
	return exact
}

func (s *search) costOf(set []*unit) Cost {
	c := Cost{PDBViolations: s.pdbViolations(set)}
	by := map[int32]int{}
	for _, u := range set {
		c.Pods += u.cost.Pods
		c.RunTime += u.cost.RunTime
		by[u.Priority]++
	}
	for p, n := range by {
		c.Units = append(c.Units, PriorityCount{Priority: p, Count: n})
	}
	sort.Slice(c.Units, func(i, j int) bool { return c.Units[i].Priority > c.Units[j].Priority })
	return c
}

// pdbViolations counts the set's pods that take a shared budget below zero, the way
// DefaultPreemption's filterPodsWithPDBViolation charges one node's victims: every pod takes one
// disruption from each of its budgets, and violates when one of them goes below zero. Units are
// charged in the caller's order (unit.order), so the count depends only on the set, and adding a
// unit never lowers it (the search's pruning relies on that).
func (s *search) pdbViolations(set []*unit) int {
	if len(s.req.Budgets) == 0 {
		return 0
	}
	var charged []*unit
	for _, u := range set {
		if u.pdb {
			charged = append(charged, u)
		}
	}
	if len(charged) == 0 {
		return 0
	}
	sort.Slice(charged, func(i, j int) bool { return charged[i].order < charged[j].order })
	left := append([]int32(nil), s.req.Budgets...)
	n := 0
	for _, u := range charged {
		for _, p := range u.Pods {
			violates := false
			for _, b := range p.Budgets {
				if b < 0 || b >= len(left) {
					continue
				}
				left[b]--
				if left[b] < 0 {
					violates = true
				}
			}
			if violates {
				n++
			}
		}
	}
	return n
}
