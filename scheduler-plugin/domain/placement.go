package domain

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// The failure in numbers (gangcontract.Placement): per tier the best candidate, its free capacity
// and what binds it, and the smallest changes that would let the gang fit. Computed only when no
// domain fits, from the rooms measure already summed, so placing a gang costs nothing more.

func (c *chooser) noteEvaluated(tier, n int) {
	if c.tierEvaluated == nil {
		c.tierEvaluated = map[int]int{}
	}
	c.tierEvaluated[tier] = n
}

// placement builds the Placement of a gang no allowed domain holds. Limit, Time and Message are
// the caller's (the plugin knows them).
func (c *chooser) placement() *gangcontract.Placement {
	l := c.req.Limit
	total := make(vector, c.k)
	for _, v := range c.p.pods {
		for i := range v {
			total[i] += v[i]
		}
	}
	out := &gangcontract.Placement{Version: gangcontract.PlacementVersion, Need: c.amounts(c.need, total)}
	for _, tier := range c.t.Tiers() {
		all := c.tierCandidates(tier, c.placedIn)
		cands := all
		if l.Hard && l.TierName != "" {
			cands = allowedOnly(l, all)
		}
		allowed := len(cands) > 0 && (!numericLimit(l) || tier <= l.Tier)
		if !allowed {
			cands = all
		}
		tp := gangcontract.TierPlacement{Tier: tier, Allowed: allowed, Candidates: len(cands), Evaluated: c.tierEvaluated[tier]}
		var best *topology.HyperNode
		for _, h := range cands {
			if best == nil || c.rooms[h.Index] > c.rooms[best.Index] {
				best = h
			}
		}
		if best != nil {
			c.describeDomain(&tp, best)
		}
		if !allowed {
			tp.Binding = gangcontract.BindingTierLimit
		}
		out.Tiers = append(out.Tiers, tp)
	}
	if root := c.t.Root(); Allows(l, root) {
		tp := gangcontract.TierPlacement{Tier: root.Tier, Allowed: true, Candidates: 1}
		c.describeDomain(&tp, root)
		out.Tiers = append(out.Tiers, tp)
	}
	// The smallest changes: fewer pods (the most any allowed domain holds), or the lowest tier above
	// the limit whose best domain holds them all.
	var fewer *gangcontract.TierPlacement
	for i := range out.Tiers {
		tp := &out.Tiers[i]
		if tp.Allowed && tp.BestRoom > 0 && tp.BestRoom < c.need && (fewer == nil || tp.BestRoom > fewer.BestRoom) {
			fewer = tp
		}
	}
	if fewer != nil {
		out.Suggestions = append(out.Suggestions, gangcontract.Suggestion{Kind: gangcontract.SuggestFewerPods, Value: fewer.BestRoom, Domain: fewer.Best})
	}
	for _, tp := range out.Tiers {
		if !tp.Allowed && tp.BestRoom >= c.need && tp.Binding == gangcontract.BindingTierLimit && c.freeCovers(tp.BestFree, total) {
			out.Suggestions = append(out.Suggestions, gangcontract.Suggestion{Kind: gangcontract.SuggestHigherTier, Value: int64(tp.Tier), Domain: tp.Best})
			break
		}
	}
	return out
}

// describeDomain fills the best candidate's numbers and, for an allowed tier, its binding constraint.
func (c *chooser) describeDomain(tp *gangcontract.TierPlacement, h *topology.HyperNode) {
	idx := h.Index
	if h.IsRoot() {
		idx = c.nh
		tp.Best = topology.RootName
	} else {
		tp.Best = h.Name
	}
	tp.BestRoom = c.rooms[idx]
	agg := make(vector, c.k)
	var pods int64
	visit := func(n string) {
		tp.Nodes++
		free, p := c.freeOf(n)
		if free == nil {
			return
		}
		tp.EligibleNodes++
		for i := range free {
			agg[i] += max(free[i], 0)
		}
		pods += max(p, 0)
	}
	if h.IsRoot() {
		c.eachNode(visit)
	} else {
		h.EachNode(visit)
	}
	tp.BestFree = c.amounts(pods, agg)
	switch {
	case tp.EligibleNodes == 0:
		tp.Binding = gangcontract.BindingNodeConstraints
	case tp.BestRoom >= c.need && !c.minOK(idx):
		tp.Binding = gangcontract.BindingMinResources
	case tp.BestRoom >= c.need:
		tp.Binding = gangcontract.BindingPacking
	default:
		// The resource that holds the fewest pods when summed over the domain; if even that holds
		// them all, the free capacity is split across nodes.
		bind, most := gangcontract.BindingPods, pods
		for i, s := range c.p.slot {
			if s > 0 && agg[i]/s < most {
				bind, most = string(c.p.names[i]), agg[i]/s
			}
		}
		if most >= c.need {
			bind = gangcontract.BindingFragmented
		}
		tp.Binding = bind
	}
}

// freeCovers reports whether the free amounts cover the summed requests (a higher tier suggestion
// must also pass the aggregate check).
func (c *chooser) freeCovers(free gangcontract.Amounts, total vector) bool {
	for i, n := range c.p.names {
		q, err := resource.ParseQuantity(free.Resources[string(n)])
		if err != nil {
			return false
		}
		have := q.Value()
		if n == corev1.ResourceCPU {
			have = q.MilliValue()
		}
		if have < total[i] || (c.p.total != nil && have < c.p.total[i]) {
			return false
		}
	}
	return true
}

// amounts writes pods and a vector of the demand's resources as quantities.
func (c *chooser) amounts(pods int64, v vector) gangcontract.Amounts {
	a := gangcontract.Amounts{Pods: pods, Resources: map[string]string{}}
	for i, n := range c.p.names {
		if n == corev1.ResourceCPU {
			a.Resources[string(n)] = resource.NewMilliQuantity(v[i], resource.DecimalSI).String()
			continue
		}
		a.Resources[string(n)] = resource.NewQuantity(v[i], resource.DecimalSI).String()
	}
	return a
}
