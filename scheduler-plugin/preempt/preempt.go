// Package preempt chooses the one domain (HyperNode, or the cluster root for a gang without a
// network topology constraint) to clear for a gang that fits nowhere, and the victims to evict there.
// It is pure: it reads the HyperNode tree, the scheduler's node snapshot and the candidate victims
// the caller lists, and decides; the plugin evicts.
//
// # The choice
//
//   - Tiers from the lowest up to the gang's limit (the anchor rule of the domain chooser applies: a
//     gang with placed pods only considers HyperNodes holding them); the first tier with a feasible
//     domain wins, so the cleared domain is always of the lowest feasible tier.
//   - Within the tier, the domain whose victims cost least (Cost.Less): fewest victim pods whose
//     eviction violates a PodDisruptionBudget (the budgets shared by the whole victim set, see
//     Request.Budgets); then, priority by priority from the highest victim
//     priority down, the fewest victim units (a unit is a whole gang or a lone pod); then the fewest
//     victim pods in total; then the least run time lost (younger victims first); then by name.
//   - A unit is evicted whole: a gang's members outside the domain go too (and count in its cost).
//   - A gang with sub-groups (Request.Groups): a victim set counts only when, with it gone, the
//     required sub-groups fit whole in their own HyperNodes inside the domain, tested by the domain
//     chooser's own sub-group search (domain.GroupsFit); the room of the flat count is a necessary
//     condition checked first, and the cost order is the same.
//   - Room is counted in pods of the gang's largest request per resource: exact when the pods ask
//     the same; for mixed sizes sound (a cleared domain holds every pod) but conservative, by at most
//     what the largest pod asks beyond each other pod (docs/scheduler.md, "Pods of different sizes").
//
// # Cost bound
//
// One pass over the nodes (free capacity, O(nodes)), one over the victims' pods, then per tier:
// every allowed HyperNode gets an upper-bound check (all its candidate victims evicted) and a
// greedy minimal set (reverse deletion, O(units × pods)); the best Request.MaxCandidatesPerTier of
// those by greedy cost get an exact branch-and-bound search, each limited to Request.Budget search
// nodes (a domain whose search hits the budget keeps its best set so far, and Result.Exact says
// so); a domain with more than 48 candidate victims keeps its greedy set. bench/scheduler's
// BenchmarkPreemptionChoice measures the search at 6,000 nodes and 9,600 HyperNodes.
package preempt

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Pod is one pod of a victim unit, bound to Node.
type Pod struct {
	Namespace, Name string
	UID             types.UID
	Node            string
	Requests        corev1.ResourceList
	// Started is when the pod started (its run time is lost when it is evicted).
	Started time.Time
	// Budgets are the PodDisruptionBudgets the pod counts against, as indexes into
	// Request.Budgets (a budget that already lists the pod as disrupted is left out).
	Budgets []int
}

// Unit is a victim candidate, evicted whole: a gang (every bound member, wherever it runs) or one
// pod without a gang. The caller lists only units that may be victims (lower priority than the
// preemptor, allowed by queue rules, not already being evicted).
type Unit struct {
	// Key names the unit: the gang's namespace/name, or the pod's.
	Key      string
	Gang     bool
	Priority int32
	Pods     []Pod
}

// Request is one preemption search.
type Request struct {
	// Pods are the requests of the preemptor gang's pods still to place; Min the aggregate floor
	// (PodGroup minResources less its placed pods' use), nil for none.
	Pods []corev1.ResourceList
	Min  corev1.ResourceList
	// Groups are the gang's sub-groups (PodGroup.spec.subGroupPolicy) as the domain chooser places
	// them (domain.GroupRequest.Groups); nil for a gang without. With groups, a victim set is taken
	// only when the required groups then fit whole, each inside one HyperNode its limit allows within
	// the cleared domain (domain.GroupsFit); Pods then gives the pod size rooms are counted in, and the
	// pods needed are the required groups' pods.
	Groups []domain.Group
	// Topology, Limit and Placed are as in domain.Request.
	Topology bool
	Limit    gang.Limit
	Placed   []string
	// Eligible reports whether the gang's pods may run on a node at all; nil accepts every node.
	Eligible func(*corev1.Node) bool
	// Held are nodes another gang's preemption holds: not used, and their pods are no victims.
	Held sets.Set[string]
	// Budgets are the disruptions each PodDisruptionBudget still allows (status.disruptionsAllowed),
	// indexed by Pod.Budgets. A victim set is charged, like DefaultPreemption charges a node's
	// victims, one violation per pod that takes a budget below zero: the budgets are shared by all
	// the set's pods (in a fixed order: units as listed, pods as listed).
	Budgets []int32
	// MaxCandidatesPerTier bounds the exact searches per tier (<= 0: 64); Budget the search nodes
	// of each (<= 0: 4096).
	MaxCandidatesPerTier int
	Budget               int
	Now                  time.Time
}

// Result is the domain to clear and its victims.
type Result struct {
	HyperNode string
	Tier      int
	Root      bool
	Victims   []*Unit
	Cost      Cost
	// Exact is false when the chosen domain's search hit the budget (its set is minimal by
	// inclusion, maybe not least cost).
	Exact bool
	// Freed is the capacity the victims give back per node, for domain.Choose's what-if.
	Freed map[string]domain.Freed
	// Domains counts the HyperNodes checked; Searched those given the exact search.
	Domains, Searched int
}

// Describe names the domain ("HyperNode leaf-3 (tier 1)" or "the cluster").
func (r *Result) Describe() string {
	if r.Root {
		return "the cluster"
	}
	return fmt.Sprintf("HyperNode %s (tier %d)", r.HyperNode, r.Tier)
}

// VictimPods counts the victims' pods.
func (r *Result) VictimPods() int {
	n := 0
	for _, u := range r.Victims {
		n += len(u.Pods)
	}
	return n
}

// Cost is a victim set's cost, compared lexicographically by Less.
type Cost struct {
	// PDBViolations counts the victim pods whose eviction takes a PodDisruptionBudget below zero.
	PDBViolations int
	// Units counts victim units per priority, highest priority first.
	Units []PriorityCount
	Pods  int
	// RunTime is the run time lost, summed over the victim pods.
	RunTime time.Duration
}

// PriorityCount is how many victim units have one priority.
type PriorityCount struct {
	Priority int32
	Count    int
}

// Less reports whether a is cheaper than b.
func (a Cost) Less(b Cost) bool {
	if a.PDBViolations != b.PDBViolations {
		return a.PDBViolations < b.PDBViolations
	}
	if c := compareUnits(a.Units, b.Units); c != 0 {
		return c < 0
	}
	if a.Pods != b.Pods {
		return a.Pods < b.Pods
	}
	return a.RunTime < b.RunTime
}

// compareUnits compares two per-priority counts from the highest priority down: at the first
// priority where they differ, fewer is cheaper.
func compareUnits(a, b []PriorityCount) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Priority > b[j].Priority):
			if a[i].Count > 0 {
				return 1
			}
			i++
		case i == len(a) || b[j].Priority > a[i].Priority:
			if b[j].Count > 0 {
				return -1
			}
			j++
		default:
			if a[i].Count != b[j].Count {
				if a[i].Count < b[j].Count {
					return -1
				}
				return 1
			}
			i++
			j++
		}
	}
	return 0
}

// String renders the cost for messages.
func (a Cost) String() string {
	var parts []string
	for _, pc := range a.Units {
		parts = append(parts, fmt.Sprintf("%d at priority %d", pc.Count, pc.Priority))
	}
	s := fmt.Sprintf("%d pod(s); units %s", a.Pods, strings.Join(parts, ", "))
	if a.PDBViolations > 0 {
		s += fmt.Sprintf("; %d PodDisruptionBudget violation(s)", a.PDBViolations)
	}
	return s
}

// NoDomain explains why no domain can be cleared.
type NoDomain struct{ Msg string }

func (e *NoDomain) Error() string { return e.Msg }

// Choose picks the domain to clear and its victims; the error is a *NoDomain when none can be.
func Choose(t topology.Tree, nodes []fwk.NodeInfo, units []*Unit, req Request) (*Result, error) {
	if len(req.Pods) == 0 {
		return nil, &NoDomain{Msg: "no pods to place"}
	}
	s := newSearch(t, nodes, units, req)
	var cands [][]*topology.HyperNode
	if req.Topology {
		var anchor *topology.HyperNode
		if len(req.Placed) > 0 {
			anchor = t.LCA(req.Placed)
			if anchor == nil {
				return nil, &NoDomain{Msg: "the gang's placed pods are in no common HyperNode"}
			}
		}
		for _, tier := range t.Tiers() {
			if req.Limit.Hard && req.Limit.TierName == "" && !req.Limit.AnyHyperNode && tier > req.Limit.Tier {
				break
			}
			var hs []*topology.HyperNode
			if anchor != nil {
				if a := t.AncestorAtTier(anchor, tier); a != nil {
					hs = []*topology.HyperNode{a}
				}
			} else {
				hs = t.AtTier(tier)
			}
			var allowed []*topology.HyperNode
			for _, h := range hs {
				if domain.Allows(req.Limit, h) {
					allowed = append(allowed, h)
				}
			}
			cands = append(cands, allowed)
		}
	}
	if root := t.Root(); root != nil && (!req.Topology || domain.Allows(req.Limit, root)) {
		cands = append(cands, []*topology.HyperNode{root})
	}
	for _, tier := range cands {
		if r := s.bestIn(tier); r != nil {
			return r, nil
		}
	}
	return nil, &NoDomain{Msg: fmt.Sprintf("no domain the gang may use (%s) can be cleared: evicting every lower-priority victim allowed there still leaves too little room for %d pod(s) (%d domain(s) checked)",
		req.Limit.Describe, len(req.Pods), s.domains)}
}
