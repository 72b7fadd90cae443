package hypernode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// Group is one HyperNode of a provider's desired tree, before it is named.
type Group struct {
	// ID is the group's stable identity within its source, e.g. "guid:0x0002c90300a0b0c0" or
	// "label:topology.example.com/leaf=l1". Hash suffixes are derived from it.
	ID string
	// NameHint is the preferred name (a switch GUID, a label value); Build makes it DNS-1123.
	NameHint string
	// Tier is the HyperNode's tier (1 = leaf); every child's tier is lower.
	Tier int
	// TierName is written to spec.tierName (leaf, spine, core, zone, ...).
	TierName string
	// Nodes are the Node members (exact names).
	Nodes []string
	// Children are the IDs of the member groups.
	Children []string
}

// maxNameLen keeps names valid as label values too (Volcano's scheduler puts them in some).
const maxNameLen = 63

// hashLen is the length of the hex suffix that separates names which would collide.
const hashLen = 6

// Build turns a provider's groups into the desired HyperNodes of source. Groups without a node
// below them are dropped (an empty HyperNode is deleted). taken reports names held by a HyperNode
// that is not source's; such a name is never used. Build fails, writing nothing, when the groups do
// not form a forest with tiers rising towards the roots.
func Build(source string, groups []Group, taken func(name string) bool) ([]*topologyv1alpha1.HyperNode, error) {
	byID := make(map[string]*Group, len(groups))
	for i := range groups {
		g := &groups[i]
		if g.ID == "" {
			return nil, fmt.Errorf("group %d (%s) has no ID", i, g.NameHint)
		}
		if _, dup := byID[g.ID]; dup {
			return nil, fmt.Errorf("group %s appears twice", g.ID)
		}
		if g.Tier < 1 {
			return nil, fmt.Errorf("group %s has tier %d; tiers start at 1", g.ID, g.Tier)
		}
		byID[g.ID] = g
	}
	parent := make(map[string]string, len(groups))
	var errs []error
	for _, g := range groups {
		for _, c := range g.Children {
			child, ok := byID[c]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("group %s names a missing child %s", g.ID, c))
			case child.Tier >= g.Tier:
				errs = append(errs, fmt.Errorf("group %s (tier %d) has child %s of tier %d; a child's tier must be lower", g.ID, g.Tier, c, child.Tier))
			case parent[c] != "" && parent[c] != g.ID:
				errs = append(errs, fmt.Errorf("group %s is a child of both %s and %s", c, parent[c], g.ID))
			default:
				parent[c] = g.ID
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// Keep the groups with a node below them, lowest tier first (children are always lower).
	order := make([]*Group, 0, len(groups))
	for i := range groups {
		order = append(order, &groups[i])
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].Tier < order[j].Tier })
	live := make(map[string]bool, len(groups))
	for _, g := range order {
		if len(g.Nodes) > 0 {
			live[g.ID] = true
			continue
		}
		for _, c := range g.Children {
			if live[c] {
				live[g.ID] = true
				break
			}
		}
	}

	names := nameGroups(order, live, taken)
	out := make([]*topologyv1alpha1.HyperNode, 0, len(live))
	for _, g := range order {
		if !live[g.ID] {
			continue
		}
		hn := &topologyv1alpha1.HyperNode{
			TypeMeta:   metav1.TypeMeta{APIVersion: topologyv1alpha1.SchemeGroupVersion.String(), Kind: "HyperNode"},
			ObjectMeta: metav1.ObjectMeta{Name: names[g.ID], Labels: map[string]string{SourceLabel: source}},
			Spec:       topologyv1alpha1.HyperNodeSpec{Tier: g.Tier, TierName: g.TierName},
		}
		members := make([]string, 0, len(g.Nodes)+len(g.Children))
		typ := topologyv1alpha1.MemberTypeNode
		if len(g.Nodes) > 0 && len(g.Children) > 0 {
			return nil, fmt.Errorf("group %s has both nodes and child groups; a HyperNode's members are of one type", g.ID)
		}
		members = append(members, g.Nodes...)
		for _, c := range g.Children {
			if live[c] {
				members = append(members, names[c])
				typ = topologyv1alpha1.MemberTypeHyperNode
			}
		}
		slices.Sort(members)
		members = slices.Compact(members)
		for _, m := range members {
			hn.Spec.Members = append(hn.Spec.Members, topologyv1alpha1.MemberSpec{
				Type:     typ,
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: m}},
			})
		}
		out = append(out, hn)
	}
	return out, nil
}

// nameGroups gives every live group a DNS-1123 name from its hint. Names that would collide (two
// hints that clean up to the same name, or a name held by another writer) get a short hash of the
// group's ID, so they stay stable from round to round.
func nameGroups(order []*Group, live map[string]bool, taken func(string) bool) map[string]string {
	base := make(map[string]string, len(order))
	count := make(map[string]int, len(order))
	for _, g := range order {
		if !live[g.ID] {
			continue
		}
		b := CleanName(g.NameHint)
		base[g.ID] = b
		count[b]++
	}
	names := make(map[string]string, len(base))
	for id, b := range base {
		if count[b] > 1 || (taken != nil && taken(b)) {
			b = WithHash(b, id)
		}
		names[id] = b
	}
	return names
}

// CleanName makes s a DNS-1123 label: lower case, [a-z0-9-] only, no leading or trailing dash, at
// most 63 characters. An empty result becomes "hypernode".
func CleanName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		if !ok {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
			continue
		}
		b.WriteRune(r)
		dash = false
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > maxNameLen {
		out = strings.TrimRight(out[:maxNameLen], "-")
	}
	if out == "" {
		out = "hypernode"
	}
	return out
}

// WithHash appends a short hash of id to name, shortening name so the result stays within 63
// characters.
func WithHash(name, id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:hashLen]
	if len(name) > maxNameLen-hashLen-1 {
		name = strings.TrimRight(name[:maxNameLen-hashLen-1], "-")
	}
	return name + "-" + h
}
