package gangcontract

import (
	"encoding/json"
	"fmt"
)

// PlacementAnnotation is the PodGroup annotation in which hyperbatch-scheduler states, in numbers,
// why it could not place the gang: its value is a Placement as JSON. The scheduler writes it when a
// gang with a network topology waits for room (at most once per PlacementWriteInterval per gang,
// and only when the numbers changed), and removes it once the gang is placed. `kubectl hyperbatch
// why` reads it; docs/scheduler.md ("Why a gang waits, in numbers") documents the format.
const PlacementAnnotation = "hyperbatch.dev/placement"

// PlacementVersion is the format version of Placement ("v").
const PlacementVersion = 1

// The binding constraints a TierPlacement names.
const (
	// BindingTierLimit: the tier is above the gang's hard limit (or not named as allowed).
	BindingTierLimit = "tier limit"
	// BindingPods: the domain has no pod slots left for the gang (node pod capacity).
	BindingPods = "pods"
	// BindingNodeConstraints: no node of the domain may run the gang's pods (node selector,
	// required affinity, taints, cordon).
	BindingNodeConstraints = "node constraints"
	// BindingFragmented: the domain's summed free capacity would hold the gang, but it is split
	// across nodes so that fewer whole pods fit.
	BindingFragmented = "fragmented"
	// BindingMinResources: the pods fit but the PodGroup's minResources exceed the domain's free total.
	BindingMinResources = "minResources"
	// BindingPacking: pods of different sizes do not pack onto the domain's nodes.
	BindingPacking = "packing"
	// BindingSubGroups: the domain has room for the gang's pods, but not for its required
	// sub-groups whole, each inside one HyperNode its own networkTopology allows (Placement.SubGroups).
	BindingSubGroups = "sub-groups"
	// BindingPodTooBig: no eligible node has the allocatable capacity for one pod of the gang.
	BindingPodTooBig = "pod larger than any node"
)

// Placement is why a gang waits, as the scheduler measured it on its last attempt.
type Placement struct {
	// Version is PlacementVersion.
	Version int `json:"v"`
	// Time is when the scheduler measured (RFC 3339).
	Time string `json:"time"`
	// Limit is the gang's network-topology limit in words ("highestTierAllowed=1", "soft").
	Limit string `json:"limit"`
	// Need is what the gang still has to place: pods, and their summed requests by resource.
	Need Amounts `json:"need"`
	// Tiers are every tier of the tree, lowest first (and the cluster root as the last entry when
	// the limit allows it), with the best domain of each.
	Tiers []TierPlacement `json:"tiers"`
	// Suggestions are the smallest changes that would let the gang fit now.
	Suggestions []Suggestion `json:"suggestions,omitempty"`
	// Message is the scheduler's message (the pods' PodScheduled=False message).
	Message string `json:"message"`
	// SubGroups is where the required sub-groups of a gang with subGroupPolicy fit, nil for other gangs.
	SubGroups *SubGroupPlacement `json:"subGroups,omitempty"`
}

// SubGroupPlacement says which of a waiting gang's required sub-groups fit where.
type SubGroupPlacement struct {
	// Required is how many sub-groups the gang needs placed (minSubGroups, then minMember).
	Required int `json:"required"`
	// Size and Limit are the pods of each required sub-group and its networkTopology in words, when
	// every required sub-group has the same (Size 0 and Limit "" otherwise).
	Size  int64  `json:"size,omitempty"`
	Limit string `json:"limit,omitempty"`
	// Domains are the allowed gang domains with room for the required pods, the ones holding the
	// most sub-groups first (at most 5).
	Domains []SubGroupDomain `json:"domains,omitempty"`
	// Holds is the most required sub-groups any allowed gang domain holds whole (Domains[0].Holds).
	Holds int `json:"holds"`
}

// SubGroupDomain is one gang domain and how many required sub-groups of Size fit whole in it.
type SubGroupDomain struct {
	HyperNode string `json:"hyperNode"`
	Tier      int    `json:"tier"`
	Holds     int    `json:"holds"`
	// Rooms are the HyperNodes inside it that the sub-groups' limit allows (the highest such), with
	// the pods each has room for, roomiest first (at most 6).
	Rooms []NamedRoom `json:"rooms,omitempty"`
}

// NamedRoom is a HyperNode and the pods it has room for.
type NamedRoom struct {
	Name string `json:"name"`
	Room int64  `json:"room"`
}

// Amounts are pods and resource quantities (Kubernetes quantity strings, e.g. "20", "40").
type Amounts struct {
	Pods      int64             `json:"pods"`
	Resources map[string]string `json:"resources,omitempty"`
}

// TierPlacement is one tier's outcome.
type TierPlacement struct {
	Tier int `json:"tier"`
	// Allowed: the gang's limit lets it use this tier.
	Allowed bool `json:"allowed"`
	// Candidates are the tier's HyperNodes the gang could use (all of the tier, or the one holding
	// its placed pods); Evaluated how many got the detailed packing check.
	Candidates int `json:"candidates"`
	Evaluated  int `json:"evaluated"`
	// Best is the candidate with the most room; BestRoom how many of the gang's pods it holds.
	Best     string `json:"best,omitempty"`
	BestRoom int64  `json:"bestRoom"`
	// BestFree is the best candidate's free capacity on the nodes the gang may use: pod slots and
	// the gang's resources.
	BestFree Amounts `json:"bestFree"`
	// Nodes and EligibleNodes count the best candidate's nodes and those the gang's pods may use.
	Nodes         int `json:"nodes"`
	EligibleNodes int `json:"eligibleNodes"`
	// Binding is what keeps the best candidate from holding the gang (Binding… constants, or a
	// resource name such as "nvidia.com/gpu" or "cpu"); "" when it holds it.
	Binding string `json:"binding,omitempty"`
}

// Suggestion is one change that would let the gang fit now.
type Suggestion struct {
	// Kind is "fewer-pods" (Value: how many of the remaining pods fit) or "higher-tier" (Value: the
	// lowest tier whose best domain holds them all).
	Kind   string `json:"kind"`
	Value  int64  `json:"value"`
	Domain string `json:"domain"`
}

// Suggestion kinds.
const (
	SuggestFewerPods  = "fewer-pods"
	SuggestHigherTier = "higher-tier"
)

// BestAllowed is the tier whose best domain is the scheduler's candidate: the lowest allowed tier
// that has one; nil when none has.
func (p *Placement) BestAllowed() *TierPlacement {
	for i := range p.Tiers {
		if p.Tiers[i].Allowed && p.Tiers[i].Best != "" {
			return &p.Tiers[i]
		}
	}
	return nil
}

// Encode writes p as the annotation's value.
func (p *Placement) Encode() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", PlacementAnnotation, err)
	}
	return string(b), nil
}

// ParsePlacement reads the annotation's value; a version this code does not know is an error.
func ParsePlacement(v string) (*Placement, error) {
	var p Placement
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return nil, fmt.Errorf("reading annotation %s: %w", PlacementAnnotation, err)
	}
	if p.Version != PlacementVersion {
		return nil, fmt.Errorf("annotation %s has format version %d; this reader knows %d (upgrade kubectl-hyperbatch)", PlacementAnnotation, p.Version, PlacementVersion)
	}
	return &p, nil
}
