package hyperjob

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/autosplit"
	"github.com/hyperbatch/hyperbatch/internal/naming"
)

// The plan side of splitPolicy mode auto (docs/multicluster.md, "How `auto` decides"): which
// children a HyperJob in mode auto has and what each needs (AutoRequest), and the decision recorded
// on the HyperJob (autoRecord, in the hbv1.AutoSplitAnnotation annotation). The decision itself is
// made by the controller (autodecide.go) from the members' numbers; BuildPlan only reads it.

// AutoRequest is what a HyperJob in mode auto asks the decision for.
type AutoRequest struct {
	// Resource is the accelerator every replicatedJob of the HyperJob splits.
	Resource corev1.ResourceName
	// Groups are the replicatedJobs' children (autosplit.Group.Name = the replicatedJob's name).
	Groups []autosplit.Group
	// Children are the child names of each group, in index order.
	Children map[string][]string
	// Candidates are the clusters every replicatedJob may use (clusterNames or a WorkloadPolicy's);
	// nil means every member cluster.
	Candidates []string
	// MaxDomains is spec.maxDomains (0: no cap).
	MaxDomains int
	// LeftOut are the members a decided split was taken back from because Karmada refused them
	// for a reason that does not pass by itself (autorefused.go), with that reason; Redecided says
	// the split is being decided the second time, which is the last.
	LeftOut   map[string]string
	Redecided bool
}

// autoPlace is where one decided child goes, and what it needs (for the reservations of later
// decisions).
type autoPlace struct {
	Cluster string `json:"cluster"`
	// Domain is the HyperNode the decision counted the child in ("" without a tier limit).
	Domain    string `json:"domain,omitempty"`
	Pods      int    `json:"pods"`
	PodDemand int64  `json:"podDemand"`
}

// autoRecord is a recorded decision: every child's place.
type autoRecord struct {
	Resource corev1.ResourceName  `json:"resource"`
	Children map[string]autoPlace `json:"children"`
	// LeftOut are the Ready members the decision did not consider, with the reason (they serve no
	// Volcano Job, a taint, Karmada refused a child there).
	LeftOut map[string]string `json:"leftOut,omitempty"`
	// Redecided: the split was taken back once after Karmada refused it (autorefused.go); with no
	// Children it is being decided again, and it is never taken back a second time.
	Redecided bool `json:"redecided,omitempty"`
}

// leftOutText names the left-out members: "member2 (serves no …); member3 (…)".
func (a *autoRecord) leftOutText() string {
	parts := make([]string, 0, len(a.LeftOut))
	for m, why := range a.LeftOut {
		parts = append(parts, fmt.Sprintf("%s (%s)", m, why))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// readAutoRecord decodes the HyperJob's recorded decision (nil when none).
func readAutoRecord(hj *trainingv1alpha1.HyperJob) (*autoRecord, error) {
	v, ok := hj.Annotations[hbv1.AutoSplitAnnotation]
	if !ok {
		return nil, nil
	}
	var rec autoRecord
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", hbv1.AutoSplitAnnotation, err)
	}
	return &rec, nil
}

func (a *autoRecord) encode() (string, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encoding the auto split: %w", err)
	}
	return string(b), nil
}

// clusters is the decision per cluster, in name order: cluster → child names.
func (a *autoRecord) clusters() ([]string, map[string][]string) {
	by := map[string][]string{}
	for name, p := range a.Children {
		by[p.Cluster] = append(by[p.Cluster], name)
	}
	names := make([]string, 0, len(by))
	for c := range by {
		names = append(names, c)
		sort.Strings(by[c])
	}
	sort.Strings(names)
	return names, by
}

// String is the decision as the condition and the Event say it, e.g. "member1: 2 (h-w-0, h-w-1 in
// leaf-a); member2: 1 (h-w-2 in leaf-c)".
func (a *autoRecord) String() string {
	names, by := a.clusters()
	parts := make([]string, 0, len(names))
	for _, c := range names {
		byDomain := map[string][]string{}
		var domains []string
		for _, n := range by[c] {
			d := a.Children[n].Domain
			if _, ok := byDomain[d]; !ok {
				domains = append(domains, d)
			}
			byDomain[d] = append(byDomain[d], n)
		}
		sort.Strings(domains)
		var in []string
		for _, d := range domains {
			s := strings.Join(byDomain[d], ", ")
			if d != "" {
				s += " in " + d
			}
			in = append(in, s)
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", c, len(by[c]), strings.Join(in, "; ")))
	}
	return strings.Join(parts, "; ")
}

// maxListedChildren bounds the condition message: beyond it, only the counts per cluster.
const maxListedChildren = 64

// conditionMessage is the decision for the AutoSplit condition.
func (a *autoRecord) conditionMessage() string {
	left := ""
	if len(a.LeftOut) > 0 {
		left = "; left out: " + a.leftOutText()
	}
	if len(a.Children) <= maxListedChildren {
		return "decided: " + a.String() + left
	}
	names, by := a.clusters()
	parts := make([]string, 0, len(names))
	for _, c := range names {
		parts = append(parts, fmt.Sprintf("%s: %d", c, len(by[c])))
	}
	return fmt.Sprintf("decided: %s (the annotation %s places every child)%s", strings.Join(parts, "; "), hbv1.AutoSplitAnnotation, left)
}

// autoState is a HyperJob's mode auto in its plan: the request, and the recorded decision if any.
type autoState struct {
	request *AutoRequest
	decided *autoRecord
}

// autoSplitOf reads mode auto from the plan's replicatedJobs: get(i) gives replicatedJob i's auto
// child (nil when not in mode auto), candidate clusters, replicas and children per replica. It
// returns nil when no replicatedJob is in mode auto, and a refusal when the HyperJob mixes modes,
// splits different accelerators, has a bad maxDomains, or asks for children the recorded decision
// does not place (a decision is never changed).
func autoSplitOf(hj *trainingv1alpha1.HyperJob, n int, get func(i int) (*AutoChild, []string, int32, int32)) (*autoState, *Refusal) {
	var autoRJ, otherRJ string
	for i := 0; i < n; i++ {
		if a, _, _, _ := get(i); a != nil {
			autoRJ = hj.Spec.ReplicatedJobs[i].Name
		} else {
			otherRJ = hj.Spec.ReplicatedJobs[i].Name
		}
	}
	if autoRJ == "" {
		return nil, nil
	}
	if otherRJ != "" {
		return nil, &Refusal{Condition: ConditionSplitPolicyInvalid, Reason: ReasonMixedSplitModes,
			Message: fmt.Sprintf("replicatedJob %q uses splitPolicy.mode auto and replicatedJob %q does not: mode auto decides the split of the whole HyperJob, so every replicatedJob needs spec.replicatedJobs[].splitPolicy.mode auto", autoRJ, otherRJ)}
	}
	req := &AutoRequest{Children: map[string][]string{}}
	if md := hj.Spec.MaxDomains; md != nil {
		if *md < 1 {
			return nil, &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonInvalidMaxDomains,
				Message: fmt.Sprintf("maxDomains %d must be at least 1", *md)}
		}
		req.MaxDomains = int(*md)
	}
	var restricted bool
	for i := 0; i < n; i++ {
		a, clusters, replicas, parts := get(i)
		rj := hj.Spec.ReplicatedJobs[i].Name
		if req.Resource == "" {
			req.Resource = a.Resource
		} else if a.Resource != req.Resource {
			return nil, &Refusal{Condition: ConditionSplitPolicyInvalid, Reason: ReasonMixedSplitModes,
				Message: fmt.Sprintf("replicatedJob %q splits %s and another replicatedJob %s: mode auto decides for one accelerator type per HyperJob (spec.replicatedJobs[].splitPolicy.acceleratorType)", rj, a.Resource, req.Resource)}
		}
		if len(clusters) > 0 {
			if !restricted {
				req.Candidates, restricted = slices.Clone(clusters), true
			} else {
				req.Candidates = slices.DeleteFunc(req.Candidates, func(c string) bool { return !slices.Contains(clusters, c) })
			}
		}
		count := int(replicas) * int(parts)
		if count <= 0 || a.Pods == 0 {
			continue
		}
		names := make([]string, count)
		for j := range names {
			names[j] = naming.ChildJobName(hj.Name, rj, j)
		}
		req.Children[rj] = names
		req.Groups = append(req.Groups, autosplit.Group{Name: rj, Children: count, Pods: a.Pods, PodDemand: a.PodDemand, Tier: a.Tier})
	}
	if len(req.Groups) == 0 {
		return nil, nil // no child to place (every replicas is 0): nothing to decide
	}
	if restricted && len(req.Candidates) == 0 {
		return nil, &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonClusterNotAllowed,
			Message: "the replicatedJobs' clusterNames (or their WorkloadPolicy's propagation.clusterNames) have no cluster in common: mode auto places every child among the clusters all of them allow"}
	}
	rec, err := readAutoRecord(hj)
	if err != nil {
		return nil, &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonAutoSplitFixed,
			Message: fmt.Sprintf("the recorded auto split cannot be read (%v); remove the annotation %s to decide again", err, hbv1.AutoSplitAnnotation)}
	}
	if rec == nil {
		return &autoState{request: req}, nil
	}
	if rec.Redecided && len(rec.Children) == 0 {
		// Taken back after Karmada refused it: decided again without the refused members.
		req.LeftOut, req.Redecided = rec.LeftOut, true
		return &autoState{request: req}, nil
	}
	var missing []string
	for _, g := range req.Groups {
		for _, c := range req.Children[g.Name] {
			p, ok := rec.Children[c]
			if !ok {
				missing = append(missing, c)
				continue
			}
			if p.Pods != g.Pods || p.PodDemand != g.PodDemand {
				return nil, &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonAutoSplitFixed,
					Message: fmt.Sprintf("child %s was placed in %s for %d pods × %d %s, and replicatedJob %q now asks for %d pods × %d: a decided split is never changed, so a template with other accelerator requests needs a new HyperJob",
						c, p.Cluster, p.Pods, p.PodDemand, rec.Resource, g.Name, g.Pods, g.PodDemand)}
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, &Refusal{Condition: ConditionSpecInvalid, Reason: ReasonAutoSplitFixed,
			Message: fmt.Sprintf("the auto split was decided for %d children (%s); children %s are not in it: a decided split is never changed, so more replicas or a larger template need a new HyperJob",
				len(rec.Children), rec.String(), strings.Join(missing, ", "))}
	}
	return &autoState{request: req, decided: rec}, nil
}
