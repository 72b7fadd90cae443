package gang

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// TaskSpecAnnotation names a Volcano Job pod's task (Volcano's batch.TaskSpecKey); minTaskMember is
// keyed by it.
const TaskSpecAnnotation = "volcano.sh/task-spec"

// SubGroupPolicy is one entry of PodGroup.spec.subGroupPolicy, parsed.
type SubGroupPolicy struct {
	Name string
	// Size is subGroupSize (at least 1): the pods of one sub-group placed together, its own gang.
	Size int32
	// MinSubGroups is minSubGroups: the gang starts only with at least this many sub-groups of the
	// policy holding Size pods each (0: no such floor).
	MinSubGroups int32
	// Selector selects the policy's pods (everything when the policy has no labelSelector).
	Selector labels.Selector
	// MatchLabelKeys split the selected pods into sub-groups: one per distinct tuple of values.
	MatchLabelKeys []string
	// Topology is the sub-group's own networkTopology; nil when unset.
	Topology *Topology
}

// SubGroup identifies one sub-group of a gang: its policy (by position) and the pods' values of the
// policy's matchLabelKeys.
type SubGroup struct {
	Policy int
	Values string // the values joined by "/", Volcano's order of matchLabelKeys
}

// Name renders the sub-group for messages, e.g. "tp[3]" or "tp[3/a]".
func (g SubGroup) Name(policies []SubGroupPolicy) string {
	if g.Policy < 0 || g.Policy >= len(policies) {
		return "(no sub-group)"
	}
	return fmt.Sprintf("%s[%s]", policies[g.Policy].Name, g.Values)
}

// parseSubGroups turns the PodGroup's subGroupPolicy into policies, or an error naming the field and
// the fix. Volcano v1.14 puts a pod into the first policy whose labelSelector matches it and whose
// matchLabelKeys all have a non-empty value on it; a policy without matchLabelKeys therefore takes no
// pod there (its sub-groups would silently not exist), so it is refused here.
func parseSubGroups(pg *schedulingv1beta1.PodGroup) ([]SubGroupPolicy, error) {
	var out []SubGroupPolicy
	seen := map[string]bool{}
	for i, sp := range pg.Spec.SubGroupPolicy {
		field := fmt.Sprintf("spec.subGroupPolicy[%d]", i)
		if sp.Name == "" {
			return nil, fmt.Errorf("%s has no name: give each sub-group policy a name (it names the sub-groups in messages)", field)
		}
		if seen[sp.Name] {
			return nil, fmt.Errorf("%s: name %q is used twice: sub-group policy names must be unique", field, sp.Name)
		}
		seen[sp.Name] = true
		p := SubGroupPolicy{Name: sp.Name, Size: 1, Selector: labels.Everything()}
		if sp.SubGroupSize != nil {
			if *sp.SubGroupSize < 1 {
				return nil, fmt.Errorf("%s.subGroupSize is %d: set it to the number of pods of one sub-group (at least 1)", field, *sp.SubGroupSize)
			}
			p.Size = *sp.SubGroupSize
		}
		if sp.MinSubGroups != nil {
			if *sp.MinSubGroups < 0 {
				return nil, fmt.Errorf("%s.minSubGroups is %d: set it to 0 or more", field, *sp.MinSubGroups)
			}
			p.MinSubGroups = *sp.MinSubGroups
		}
		if sp.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(sp.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("%s.labelSelector: %w", field, err)
			}
			p.Selector = sel
		}
		if len(sp.MatchLabelKeys) == 0 {
			return nil, fmt.Errorf("%s (%s) has no matchLabelKeys: Volcano puts no pod into such a policy; list the pod label whose value names the sub-group (e.g. matchLabelKeys: [volcano.sh/partition-id])", field, sp.Name)
		}
		p.MatchLabelKeys = append([]string(nil), sp.MatchLabelKeys...)
		if nt := sp.NetworkTopology; nt != nil {
			t := &Topology{Mode: Mode(nt.Mode), HighestTierName: nt.HighestTierName}
			if nt.HighestTierAllowed != nil {
				v := *nt.HighestTierAllowed
				t.HighestTier = &v
			}
			if t.Mode == "" {
				t.Mode = Hard
			}
			if t.HighestTier != nil && t.HighestTierName != "" {
				return nil, fmt.Errorf("%s.networkTopology sets both highestTierAllowed and highestTierName: keep one", field)
			}
			p.Topology = t
		}
		out = append(out, p)
	}
	return out, nil
}

// SubGroupOf returns the pod's sub-group, as Volcano v1.14 matches it: the first policy whose
// selector matches the pod's labels and whose matchLabelKeys all have a non-empty value; false when
// no policy takes the pod (it then belongs to the gang only).
func SubGroupOf(policies []SubGroupPolicy, pod *corev1.Pod) (SubGroup, bool) {
	for i, p := range policies {
		if !p.Selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		vals := make([]string, 0, len(p.MatchLabelKeys))
		ok := true
		for _, k := range p.MatchLabelKeys {
			v := pod.Labels[k]
			if v == "" {
				ok = false
				break
			}
			vals = append(vals, v)
		}
		if ok {
			return SubGroup{Policy: i, Values: strings.Join(vals, "/")}, true
		}
	}
	return SubGroup{Policy: -1}, false
}

// TaskMins is minTaskMember as Volcano applies it: per task (the pods' volcano.sh/task-spec
// annotation), the pods that must hold a node before the gang starts. Volcano ignores the whole map
// when its sum exceeds minMember, and so does this (nil).
func TaskMins(pg *schedulingv1beta1.PodGroup) map[string]int32 {
	if len(pg.Spec.MinTaskMember) == 0 {
		return nil
	}
	var sum int32
	for _, v := range pg.Spec.MinTaskMember {
		sum += v
	}
	if sum > pg.Spec.MinMember {
		return nil
	}
	out := map[string]int32{}
	for k, v := range pg.Spec.MinTaskMember {
		if v > 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SortedSubGroups orders sub-groups by policy, then by their values (numbers numerically, as
// Volcano's partition ids are), so that "the first N sub-groups" is stable.
func SortedSubGroups(gs []SubGroup) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Policy != gs[j].Policy {
			return gs[i].Policy < gs[j].Policy
		}
		a, b := gs[i].Values, gs[j].Values
		if len(a) != len(b) && isDigits(a) && isDigits(b) {
			return len(a) < len(b)
		}
		return a < b
	})
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
