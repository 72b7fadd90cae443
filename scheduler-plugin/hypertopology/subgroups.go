package hypertopology

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// ReasonSubGroupFallback is the Event of a soft sub-group placed above the tier it asked for.
const ReasonSubGroupFallback = "SubGroupFallback"

// looseGroup names the gang's pods in no sub-group in a plan's groups.
const looseGroup = ""

// groupOf names the pod's sub-group in a plan ("" when it is in none).
func groupOf(spec *gang.Spec, pod *corev1.Pod) string {
	g, ok := gang.SubGroupOf(spec.SubGroups, pod)
	if !ok {
		return looseGroup
	}
	return g.Name(spec.SubGroups)
}

// subGroupCensus is the gang's pods by sub-group.
type subGroupCensus struct {
	keys   []gang.SubGroup // sub-groups, sorted
	pods   map[gang.SubGroup]int
	placed map[gang.SubGroup][]string // nodes of placed pods
	loose  int                        // pods in no sub-group, not placed
	looseP []string                   // nodes of placed pods in no sub-group
}

func censusOf(spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string) *subGroupCensus {
	c := &subGroupCensus{pods: map[gang.SubGroup]int{}, placed: map[gang.SubGroup][]string{}}
	for _, m := range members {
		g, ok := gang.SubGroupOf(spec.SubGroups, m)
		node, isPlaced := placed[m.UID]
		if !ok {
			if isPlaced {
				c.looseP = append(c.looseP, node)
			} else {
				c.loose++
			}
			continue
		}
		if _, seen := c.pods[g]; !seen {
			c.keys = append(c.keys, g)
		}
		c.pods[g]++
		if isPlaced {
			c.placed[g] = append(c.placed[g], node)
		}
	}
	gang.SortedSubGroups(c.keys)
	return c
}

// groupRequest turns a gang with sub-groups into the groups to place: per policy the sub-groups
// minSubGroups asks for (those with placed pods first, then in order), then whole sub-groups and
// pods in no sub-group until minMember pods would hold a node; every other complete sub-group and
// the remaining pods are placed when they fit. The error says what the gang lacks.
func groupRequest(t topology.Tree, spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string) ([]domain.Group, error) {
	c := censusOf(spec, members, placed)
	var groups []domain.Group
	required := map[gang.SubGroup]bool{}
	total := len(placed)
	for pi, pol := range spec.SubGroups {
		var have int32
		var ready []gang.SubGroup
		for _, g := range c.keys {
			if g.Policy != pi {
				continue
			}
			switch {
			case int32(len(c.placed[g])) >= pol.Size:
				have++
			case int32(c.pods[g]) >= pol.Size:
				ready = append(ready, g)
			}
		}
		sort.SliceStable(ready, func(i, j int) bool { return len(c.placed[ready[i]]) > len(c.placed[ready[j]]) })
		for _, g := range ready {
			if have >= pol.MinSubGroups {
				break
			}
			required[g] = true
			total += int(pol.Size) - len(c.placed[g])
			have++
		}
		if have < pol.MinSubGroups {
			return nil, fmt.Errorf("subGroupPolicy %s: minSubGroups %d, but only %d sub-group(s) have subGroupSize %d pods (pods are matched by labelSelector %q and matchLabelKeys %v)",
				pol.Name, pol.MinSubGroups, have, pol.Size, pol.Selector.String(), pol.MatchLabelKeys)
		}
	}
	looseReq := 0
	if gap := int(spec.MinMember) - total; gap > 0 {
		looseReq = min(gap, c.loose)
		total += looseReq
	}
	for _, g := range c.keys {
		if total >= int(spec.MinMember) {
			break
		}
		size := int(spec.SubGroups[g.Policy].Size)
		if required[g] || len(c.placed[g]) >= size || c.pods[g] < size {
			continue
		}
		required[g] = true
		total += size - len(c.placed[g])
	}
	if total < int(spec.MinMember) {
		return nil, fmt.Errorf("minMember %d cannot be met by whole sub-groups and the pods in none: %d pod(s) would hold a node (a sub-group counts once it has subGroupSize pods; pods beyond subGroupSize wait for room beside their sub-group)", spec.MinMember, total)
	}
	for _, g := range c.keys {
		pol := spec.SubGroups[g.Policy]
		left := int(pol.Size) - len(c.placed[g])
		if left <= 0 || c.pods[g] < int(pol.Size) {
			continue
		}
		grp := domain.Group{Name: g.Name(spec.SubGroups), Pods: left, Required: required[g], Placed: c.placed[g]}
		if pol.Topology != nil {
			l, err := pol.Topology.Resolve(t.HasTierName)
			if err != nil {
				return nil, fmt.Errorf("subGroupPolicy %s: %w", pol.Name, err)
			}
			grp.Topology, grp.Limit = true, l
			if !l.Hard {
				want := *pol.Topology
				want.Mode = gang.Hard
				if grp.Want, err = want.Resolve(t.HasTierName); err != nil {
					grp.Want = gang.Limit{Hard: true, AnyHyperNode: true, Describe: "one HyperNode"}
				}
			}
		}
		groups = append(groups, grp)
	}
	if looseReq > 0 {
		groups = append(groups, domain.Group{Name: looseGroup, Pods: looseReq, Required: true, Placed: c.looseP})
	}
	if rest := c.loose - looseReq; rest > 0 {
		groups = append(groups, domain.Group{Name: looseGroup + " ", Pods: rest, Placed: c.looseP})
	}
	return groups, nil
}

// chooseGroups is choose for a gang with sub-groups.
func (p *Plugin) chooseGroups(t topology.Tree, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string, nodes []fwk.NodeInfo, req domain.Request) (*domain.Choice, error) {
	groups, shape, eligible, err := groupDemand(t, pod, spec, members, placed)
	if err != nil {
		return nil, err
	}
	req.Demand = domain.Demand{Pods: []corev1.ResourceList{shape}}
	req.Eligible = eligible
	if held := p.res.heldAgainst(spec.Key, corev1helpers.PodPriority(pod), time.Now()); held.Len() > 0 {
		req.Eligible = heldEligible(req.Eligible, held)
	}
	gc, err := domain.ChooseGroups(t, nodes, domain.GroupRequest{Request: req, Groups: groups})
	if err != nil {
		return nil, err
	}
	return gc.Choice, nil
}

// groupDemand is what a gang with sub-groups still has to place, for the domain chooser and the
// preemption search alike: its groups (groupRequest), the one pod size every pod is counted in (the
// largest request of the pods still to place), and the nodes every one of them may use.
func groupDemand(t topology.Tree, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string) ([]domain.Group, corev1.ResourceList, func(*corev1.Node) bool, error) {
	if spec.SubGroupErr != nil {
		return nil, nil, nil, spec.SubGroupErr
	}
	groups, err := groupRequest(t, spec, members, placed)
	if err != nil {
		return nil, nil, nil, err
	}
	shape := corev1.ResourceList{}
	pending := []*corev1.Pod{pod}
	for _, m := range members {
		if _, ok := placed[m.UID]; !ok && m.UID != pod.UID && m.Spec.NodeName == "" {
			pending = append(pending, m)
		}
	}
	seen := map[string]bool{}
	var preds []func(*corev1.Node) bool
	for _, m := range pending {
		for n, q := range resourcehelper.PodRequests(m, resourcehelper.PodResourcesOptions{}) {
			if cur, ok := shape[n]; !ok || q.Cmp(cur) > 0 {
				shape[n] = q
			}
		}
		if k := nodeConstraints(m); !seen[k] {
			seen[k] = true
			preds = append(preds, eligibleFor(m))
		}
	}
	eligible := func(n *corev1.Node) bool {
		for _, f := range preds {
			if !f(n) {
				return false
			}
		}
		return true
	}
	return groups, shape, eligible, nil
}

// groupPins is the nodes a pod of the named group may still take: where the plan gives the group a
// quota its placed pods have not used up; nil and a message when none is left.
func groupPins(pl *plan, spec *gang.Spec, pod *corev1.Pod, members []*corev1.Pod, placed map[types.UID]string) (sets.Set[string], string) {
	name := groupOf(spec, pod)
	quota := map[string]int{}
	found := false
	for _, gp := range pl.groups {
		if gp.Placed && (gp.Name == name || (name == looseGroup && gp.Name == looseGroup+" ")) {
			found = true
			for n, q := range gp.Quota {
				quota[n] += q
			}
		}
	}
	if !found {
		if name == looseGroup {
			return nil, fmt.Sprintf("gang %s: its pods in no sub-group are not needed to reach minMember %d and found no room in %s; waiting", spec.Key, spec.MinMember, pl.describe)
		}
		return nil, fmt.Sprintf("gang %s: sub-group %s is not needed to start the gang (minSubGroups and minMember are met without it) and has no room whole in %s, or it lacks pods; waiting", spec.Key, name, pl.describe)
	}
	for _, m := range members {
		if n, ok := placed[m.UID]; ok && m.UID != pod.UID && groupOf(spec, m) == name {
			quota[n]--
		}
	}
	out := sets.New[string]()
	for n, q := range quota {
		if q > 0 {
			out.Insert(n)
		}
	}
	if out.Len() == 0 {
		return nil, fmt.Sprintf("gang %s: sub-group %s has placed every pod its plan has room for in %s (pods beyond subGroupSize wait for room beside their sub-group)", spec.Key, name, pl.describe)
	}
	return out, ""
}

// describeGroups summarises where the sub-groups go, e.g. "sub-groups tp[0] in leaf-0, tp[1] in leaf-2".
func describeGroups(gs []domain.GroupPlacement) string {
	var parts []string
	for _, g := range gs {
		if !g.Placed || strings.TrimSpace(g.Name) == "" {
			continue
		}
		where := g.HyperNode
		if g.Root {
			where = "the cluster"
		}
		parts = append(parts, fmt.Sprintf("%s in %s", g.Name, where))
	}
	if len(parts) == 0 {
		return ""
	}
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("... (%d sub-groups)", len(parts)))
	}
	return "sub-groups " + strings.Join(parts, ", ")
}

// subGroupsReady checks Volcano's start conditions beyond minMember: every policy's minSubGroups
// sub-groups with subGroupSize pods holding a node, and minTaskMember per task; "" when met.
func subGroupsReady(spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string) string {
	if len(spec.SubGroups) > 0 {
		counts := map[gang.SubGroup]int32{}
		for _, m := range members {
			if _, ok := placed[m.UID]; !ok {
				continue
			}
			if g, ok := gang.SubGroupOf(spec.SubGroups, m); ok {
				counts[g]++
			}
		}
		for pi, pol := range spec.SubGroups {
			if pol.MinSubGroups == 0 {
				continue
			}
			var n int32
			for g, c := range counts {
				if g.Policy == pi && c >= pol.Size {
					n++
				}
			}
			if n < pol.MinSubGroups {
				return fmt.Sprintf("%d of the %d sub-group(s) of %s that minSubGroups asks for hold a node", n, pol.MinSubGroups, pol.Name)
			}
		}
	}
	if len(spec.TaskMins) > 0 {
		counts := map[string]int32{}
		for _, m := range members {
			if _, ok := placed[m.UID]; ok {
				counts[m.Annotations[gang.TaskSpecAnnotation]]++
			}
		}
		tasks := make([]string, 0, len(spec.TaskMins))
		for k := range spec.TaskMins {
			tasks = append(tasks, k)
		}
		sort.Strings(tasks)
		for _, k := range tasks {
			if counts[k] < spec.TaskMins[k] {
				return fmt.Sprintf("task %s has %d of its minTaskMember %d pods holding a node", k, counts[k], spec.TaskMins[k])
			}
		}
	}
	return ""
}
