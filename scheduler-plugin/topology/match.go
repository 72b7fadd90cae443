package topology

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// spec is the parsed form of one HyperNode: what it names, not what it resolves to.
type spec struct {
	name     string
	tier     int
	tierName string
	raw      topologyv1alpha1.HyperNodeSpec

	// children are HyperNode members (exactMatch only, as in Volcano; other selectors on a HyperNode
	// member are ignored and reported as a warning).
	children []string
	// Node members.
	exact   []string
	regexes []regexMember
	labels  []labelMember

	// direct is the resolved set of Node members (only nodes the cache knows).
	direct map[string]struct{}
	// warnings explain members that select nothing because they are malformed.
	warnings []string
}

type regexMember struct {
	re *regexp.Regexp
	// prefix is a literal every matching node name starts with; set only when the pattern is anchored
	// at the start of the text, so that the prefix index is exact.
	prefix string
}

type labelMember struct {
	sel labels.Selector
	// pair is one "key=value" the selector requires (from matchLabels), used to index it; empty for
	// selectors made only of expressions.
	pair string
}

func parseSpec(hn *topologyv1alpha1.HyperNode) *spec {
	s := &spec{
		name:     hn.Name,
		tier:     hn.Spec.Tier,
		tierName: hn.Spec.TierName,
		raw:      *hn.Spec.DeepCopy(),
		direct:   map[string]struct{}{},
	}
	for i, m := range hn.Spec.Members {
		sel := m.Selector
		switch m.Type {
		case topologyv1alpha1.MemberTypeHyperNode:
			if sel.ExactMatch == nil || sel.ExactMatch.Name == "" {
				s.warnings = append(s.warnings, fmt.Sprintf("HyperNode %s member %d: a HyperNode member must use exactMatch; ignored", hn.Name, i))
				continue
			}
			s.children = append(s.children, sel.ExactMatch.Name)
		case topologyv1alpha1.MemberTypeNode:
			// Volcano unions every selector that is set; the CRD allows only one.
			if sel.ExactMatch != nil && sel.ExactMatch.Name != "" {
				s.exact = append(s.exact, sel.ExactMatch.Name)
			}
			if sel.RegexMatch != nil {
				rm, err := compileRegex(sel.RegexMatch.Pattern)
				if err != nil {
					s.warnings = append(s.warnings, fmt.Sprintf("HyperNode %s member %d: regexMatch %q: %v; selects no node", hn.Name, i, sel.RegexMatch.Pattern, err))
				} else {
					s.regexes = append(s.regexes, rm)
				}
			}
			if sel.LabelMatch != nil {
				lm, err := compileLabels(sel.LabelMatch)
				if err != nil {
					s.warnings = append(s.warnings, fmt.Sprintf("HyperNode %s member %d: labelMatch: %v; selects no node", hn.Name, i, err))
				} else if lm != nil {
					s.labels = append(s.labels, *lm)
				}
			}
		default:
			s.warnings = append(s.warnings, fmt.Sprintf("HyperNode %s member %d: unknown member type %q; ignored", hn.Name, i, m.Type))
		}
	}
	return s
}

func compileRegex(pattern string) (regexMember, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return regexMember{}, err
	}
	rm := regexMember{re: re}
	if prefix, _ := re.LiteralPrefix(); prefix != "" && anchoredAtStart(pattern) {
		rm.prefix = prefix
	}
	return rm, nil
}

// anchoredAtStart reports whether every match of pattern must start at the beginning of the text.
func anchoredAtStart(pattern string) bool {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture && len(re.Sub) == 1 {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpBeginText:
		return true
	case syntax.OpConcat:
		return len(re.Sub) > 0 && re.Sub[0].Op == syntax.OpBeginText
	}
	return false
}

// compileLabels mirrors Volcano: an empty selector selects nothing (nil, nil).
func compileLabels(ls *metav1.LabelSelector) (*labelMember, error) {
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	lm := &labelMember{sel: sel}
	if len(ls.MatchLabels) > 0 {
		keys := make([]string, 0, len(ls.MatchLabels))
		for k := range ls.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		lm.pair = keys[0] + "=" + ls.MatchLabels[keys[0]]
	}
	return lm, nil
}

// matchesNode reports whether one of s's Node members selects the node.
func (s *spec) matchesNode(name string, nodeLabels map[string]string) bool {
	for _, e := range s.exact {
		if e == name {
			return true
		}
	}
	for _, r := range s.regexes {
		if r.re.MatchString(name) {
			return true
		}
	}
	if len(s.labels) > 0 {
		set := labels.Set(nodeLabels)
		for _, l := range s.labels {
			if l.sel.Matches(set) {
				return true
			}
		}
	}
	return false
}

// sameShape reports whether two specs resolve identically (status-only updates are frequent).
func sameShape(a *spec, b *topologyv1alpha1.HyperNode) bool {
	if a.tier != b.Spec.Tier || a.tierName != b.Spec.TierName || len(a.raw.Members) != len(b.Spec.Members) {
		return false
	}
	for i := range a.raw.Members {
		if !memberEqual(&a.raw.Members[i], &b.Spec.Members[i]) {
			return false
		}
	}
	return true
}

func memberEqual(a, b *topologyv1alpha1.MemberSpec) bool {
	if a.Type != b.Type {
		return false
	}
	x, y := a.Selector, b.Selector
	if (x.ExactMatch == nil) != (y.ExactMatch == nil) || (x.ExactMatch != nil && x.ExactMatch.Name != y.ExactMatch.Name) {
		return false
	}
	if (x.RegexMatch == nil) != (y.RegexMatch == nil) || (x.RegexMatch != nil && x.RegexMatch.Pattern != y.RegexMatch.Pattern) {
		return false
	}
	if (x.LabelMatch == nil) != (y.LabelMatch == nil) {
		return false
	}
	if x.LabelMatch != nil {
		return metav1.FormatLabelSelector(x.LabelMatch) == metav1.FormatLabelSelector(y.LabelMatch)
	}
	return true
}

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }
