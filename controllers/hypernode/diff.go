package hypernode

import (
	"slices"
	"sort"
	"strings"

	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// Diff returns the events that turn existing (source's HyperNodes) into desired, in an order under
// which no reader ever sees a member that does not exist or a cycle: creates from the lowest tier
// up (children before parents), then updates from the lowest tier up (a parent gains a new child
// only after it exists and drops an old one before it goes), then deletes from the highest tier
// down (parents before children). A HyperNode that already matches produces no event.
func Diff(desired, existing []*topologyv1alpha1.HyperNode) []Event {
	have := make(map[string]*topologyv1alpha1.HyperNode, len(existing))
	for _, hn := range existing {
		have[hn.Name] = hn
	}
	want := make(map[string]bool, len(desired))
	var creates, updates, deletes []Event
	for _, d := range desired {
		want[d.Name] = true
		e, ok := have[d.Name]
		if ok && d.Spec.TierName != e.Spec.TierName && SameTierName(d.Spec.TierName, e.Spec.TierName) {
			// A HyperNode taken over from Volcano's discovery keeps its tierName (volcano.sh/tor
			// where ours is tor), so gangs that name it keep matching.
			d = d.DeepCopy()
			d.Spec.TierName = e.Spec.TierName
		}
		switch {
		case !ok:
			creates = append(creates, Event{Type: EventCreate, HyperNode: d})
		case !Matches(d, e):
			updates = append(updates, Event{Type: EventUpdate, HyperNode: d})
		}
	}
	for _, e := range existing {
		if !want[e.Name] {
			deletes = append(deletes, Event{Type: EventDelete, HyperNode: e})
		}
	}
	byTier := func(evs []Event, up bool) {
		sort.SliceStable(evs, func(i, j int) bool {
			a, b := evs[i].HyperNode, evs[j].HyperNode
			if a.Spec.Tier != b.Spec.Tier {
				return (a.Spec.Tier < b.Spec.Tier) == up
			}
			return a.Name < b.Name
		})
	}
	byTier(creates, true)
	byTier(updates, true)
	byTier(deletes, false)
	out := make([]Event, 0, len(creates)+len(updates)+len(deletes))
	out = append(out, creates...)
	out = append(out, updates...)
	return append(out, deletes...)
}

// Matches reports whether existing already carries everything desired sets: its labels, tier,
// tier name and the same set of members.
func Matches(desired, existing *topologyv1alpha1.HyperNode) bool {
	for k, v := range desired.Labels {
		if got, ok := existing.Labels[k]; !ok || got != v {
			return false
		}
	}
	if desired.Spec.Tier != existing.Spec.Tier || desired.Spec.TierName != existing.Spec.TierName {
		return false
	}
	return slices.Equal(memberKeys(desired), memberKeys(existing))
}

// memberKeys renders members as sorted comparable strings.
func memberKeys(hn *topologyv1alpha1.HyperNode) []string {
	out := make([]string, 0, len(hn.Spec.Members))
	for _, m := range hn.Spec.Members {
		k := string(m.Type) + "|"
		switch s := m.Selector; {
		case s.ExactMatch != nil:
			k += "exact|" + s.ExactMatch.Name
		case s.RegexMatch != nil:
			k += "regex|" + s.RegexMatch.Pattern
		case s.LabelMatch != nil:
			k += "label|" + s.LabelMatch.String()
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// SameTierName reports whether two tierNames name the same tier: equal, or one is a label key
// (volcano.sh/tor, as Volcano v1.15's label discovery writes) and the other its last segment (tor,
// as this package writes). It is the rule hyperbatch-scheduler resolves highestTierName by.
func SameTierName(a, b string) bool {
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
