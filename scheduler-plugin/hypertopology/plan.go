package hypertopology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// planFor returns the gang's cached plan when still valid, otherwise chooses the domain.
func (p *Plugin) planFor(ctx context.Context, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, nodes []fwk.NodeInfo) (*plan, *fwk.Status) {
	var out *plan
	var status *fwk.Status
	p.tree.Read(func(t topology.Tree) {
		if ok, why := t.Ready(); !ok {
			status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s waits: the HyperNode tree is not usable: %s", spec.Key, why))
			return
		}
		if (spec.Topology != nil || len(spec.SubGroups) > 0) && t.Len() == 0 {
			// No HyperNode is known (none exist yet, or the informer has not delivered them): the
			// cluster root would be the only domain and a hard limit could not be honoured, so a
			// topology-constrained gang waits; a HyperNode's arrival requeues it.
			status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s waits: its networkTopology needs HyperNodes and none exist yet", spec.Key))
			return
		}
		if c := p.getPlan(spec.Key); c != nil && c.pgUID == spec.UID && c.pgKey == spec.Placement && c.treeGen == t.Generation() {
			out = c
			return
		}
		domainChoices.Inc()
		choice, limit, err := p.choose(t, pod, spec, members, nodes, nil)
		if err != nil {
			var u *domain.Unsatisfiable
			if errors.As(err, &u) {
				if note := noUsableNode(pod, nodes); note != "" {
					u.Msg = note // names the taints instead of calling the pod too big
				} else if note := excludedByTaint(pod, nodes); note != "" {
					u.Msg += "; " + note // a NotReady node is excluded, not full
				}
			}
			status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s (%s) waits: %v", spec.Key, limit.Describe, err))
			if u != nil && u.Placement != nil {
				u.Placement.Limit, u.Placement.Message = limit.Describe, status.Message()
				p.placements.publish(spec.Key, u.Placement)
			}
			return
		}
		out = &plan{pgUID: spec.UID, pgKey: spec.Placement, treeGen: t.Generation(), hyper: choice.HyperNode, tier: choice.Tier,
			root: choice.Root, nodes: choice.Nodes, rooms: choice.Rooms, need: choice.Need, spilled: len(choice.Spilled) > 0}
		if choice.Root {
			out.describe = "the whole cluster"
		} else {
			out.describe = fmt.Sprintf("HyperNode %s (tier %d)", choice.HyperNode, choice.Tier)
		}
		if len(choice.Spilled) > 0 {
			out.describe += fmt.Sprintf(", packed into %s", describeLeaves(choice.Spilled))
		}
		if choice.Groups != nil {
			out.groups = choice.Groups
			if d := describeGroups(choice.Groups); d != "" {
				out.describe += ", " + d
			}
			for _, g := range choice.Groups {
				if g.Fallback != "" {
					p.events.gang(spec, pod, corev1.EventTypeWarning, ReasonSubGroupFallback, fmt.Sprintf("gang %s: %s", spec.Key, g.Fallback))
				}
			}
		}
		p.setPlan(spec.Key, out)
		klog.FromContext(ctx).V(2).Info("Chose gang domain", "gang", spec.Key, "domain", out.describe, "need", choice.Need, "room", choice.Room, "limit", limit.Describe)
	})
	return out, status
}

// describeLeaves names the leaves a spilled gang is packed into (at most 4 by name).
func describeLeaves(leaves []string) string {
	if len(leaves) <= 4 {
		return fmt.Sprintf("%d leaves (%s)", len(leaves), strings.Join(leaves, ", "))
	}
	return fmt.Sprintf("%d leaves (%s, ...)", len(leaves), strings.Join(leaves[:4], ", "))
}

// choose runs the domain choice for the gang's remaining pods. freed is capacity other gangs'
// reservations would give back (PostFilter's what-if), nil otherwise.
func (p *Plugin) choose(t topology.Tree, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, nodes []fwk.NodeInfo, freed map[string]domain.Freed) (*domain.Choice, gang.Limit, error) {
	req := domain.Request{
		Freed:                freed,
		MaxCandidatesPerTier: int(*p.args.MaxCandidatesPerTier),
	}
	var limit gang.Limit
	if spec.Topology != nil {
		var err error
		limit, err = spec.Topology.Resolve(t.HasTierName)
		if err != nil {
			return nil, gang.Limit{Describe: string(spec.Topology.Mode)}, err
		}
		req.Topology, req.Limit = true, limit
	} else {
		limit.Describe = "no network topology"
	}
	placed := p.res.Placed(spec.Key, members)
	nodeSet := map[string]struct{}{}
	for _, n := range placed {
		nodeSet[n] = struct{}{}
	}
	for n := range nodeSet {
		req.Placed = append(req.Placed, n)
	}
	sort.Strings(req.Placed)
	if len(spec.SubGroups) > 0 || spec.SubGroupErr != nil {
		c, err := p.chooseGroups(t, pod, spec, members, placed, nodes, req)
		return c, limit, err
	}
	req.Demand = p.demand(pod, spec, members, placed)
	if req.Demand.Eligible == nil {
		// Every pod to place has the current pod's node constraints.
		req.Eligible = eligibleFor(pod)
	}
	// Nodes another gang's preemption holds are not this gang's to use (unless it outranks it).
	if held := p.res.heldAgainst(spec.Key, corev1helpers.PodPriority(pod), time.Now()); held.Len() > 0 {
		req.Eligible = heldEligible(req.Eligible, held)
	}
	c, err := domain.Choose(t, nodes, req)
	return c, limit, err
}

// demand lists the requests of the pods the gang still has to place: minMember less the placed
// pods (at least the current one), the current pod first, then pending members by name.
func (p *Plugin) demand(pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, placed map[types.UID]string) domain.Demand {
	need := max(int(spec.MinMember)-len(placed), 1)
	pending := []*corev1.Pod{pod}
	var others []*corev1.Pod
	for _, m := range members {
		if _, ok := placed[m.UID]; ok || m.UID == pod.UID || m.Spec.NodeName != "" {
			continue
		}
		others = append(others, m)
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Name < others[j].Name })
	pending = append(pending, others...)
	d := domain.Demand{}
	var srcs []*corev1.Pod
	for i := 0; i < need; i++ {
		src := pod
		if i < len(pending) {
			src = pending[i]
		}
		srcs = append(srcs, src)
		d.Pods = append(d.Pods, resourcehelper.PodRequests(src, resourcehelper.PodResourcesOptions{}))
	}
	// Members with node constraints other than the current pod's get their own eligibility, so the
	// domain is chosen where each of them can run (sizing it by the current pod's constraints alone
	// could pick a domain the others never fit, over and over).
	mine := nodeConstraints(pod)
	for _, src := range srcs {
		if nodeConstraints(src) != mine {
			d.Eligible = make([]func(*corev1.Node) bool, len(srcs))
			for i, src := range srcs {
				d.Eligible[i] = eligibleFor(src)
			}
			break
		}
	}
	if len(spec.MinResources) > 0 {
		left := spec.MinResources.DeepCopy()
		used := corev1.ResourceList{}
		byUID := map[types.UID]*corev1.Pod{}
		for _, m := range members {
			byUID[m.UID] = m
		}
		for uid, a := range p.res.Assumed(spec.Key) {
			byUID[uid] = a.Pod
		}
		for uid := range placed {
			if m := byUID[uid]; m != nil {
				for n, q := range resourcehelper.PodRequests(m, resourcehelper.PodResourcesOptions{}) {
					v := used[n]
					v.Add(q)
					used[n] = v
				}
			}
		}
		for n, q := range used {
			v := left[n]
			v.Sub(q)
			if v.Sign() < 0 {
				v.Set(0)
			}
			left[n] = v
		}
		d.Min = left
	}
	return d
}

// nodeConstraints renders what eligibleFor looks at (nodeSelector, required node affinity,
// tolerations), to tell whether two pods may use the same nodes.
func nodeConstraints(pod *corev1.Pod) string {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, err := json.Marshal(struct {
		Selector    map[string]string
		Required    *corev1.NodeSelector
		Tolerations []corev1.Toleration
	}{pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	if err != nil {
		return string(pod.UID) // cannot happen for these types; then treat the pod as distinct
	}
	return string(b)
}

// eligibleFor mirrors the scheduler's cheap node-level filters (cordon, NoSchedule/NoExecute taints,
// required node affinity and nodeSelector) so domains are sized by nodes the pods may really use.
// Tolerations are matched like the TaintToleration plugin does, including its numeric comparison
// operators when the scheduler's TaintTolerationComparisonOperators feature gate is on (1.35+).
func eligibleFor(pod *corev1.Pod) func(*corev1.Node) bool {
	cmpOps := utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators)
	logger := klog.Background()
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	cordon := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	return func(n *corev1.Node) bool {
		if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, cordon, cmpOps) {
			return false
		}
		if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, n.Spec.Taints, pod.Spec.Tolerations, noSchedule, cmpOps); bad {
			return false
		}
		ok, _ := aff.Match(n)
		return ok
	}
}
