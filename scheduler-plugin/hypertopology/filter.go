package hypertopology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

const stateKey fwk.StateKey = "hyperbatch.dev/" + Name

// state is what PreFilter learned about the pod's gang, for the later extension points.
type state struct {
	key  gang.Key
	spec *gang.Spec // nil when the PodGroup does not exist
	plan *plan      // nil when the gang is not pinned (no topology constraint, or no plan yet)
	// capacity is true when the pod failed (or may fail) for lack of room rather than because the
	// gang is incomplete: only then does PostFilter release reservations.
	capacity bool
}

func (s *state) Clone() fwk.StateData { return s }

func readState(cs fwk.CycleState) *state {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*state)
	return s
}

// PreFilter resolves the gang and pins the pod to the gang's domain.
func (p *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if group, ok := gang.UpstreamGroupOf(pod); ok {
		return nil, refuseUpstreamGroup(ctx, pod, group)
	}
	key, ok := gang.KeyOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	st := &state{key: key}
	cs.Write(stateKey, st)
	pg, err := p.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			msg := fmt.Sprintf("waiting for PodGroup %s (named by the pod's %s annotation)", key, gang.GroupNameAnnotation)
			// No Event (no PodGroup to attach it to); once per pod attempt, and such pods are not
			// retried until the PodGroup appears.
			klog.FromContext(ctx).V(2).Info("Gang waits", "gang", key, "pod", klog.KObj(pod), "reason", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		return nil, fwk.AsStatus(err)
	}
	spec := gang.SpecOf(pg, pod)
	st.spec = &spec
	members := p.members(key)
	if n := int32(len(members)); n < spec.MinMember {
		// The Event omits the count so that it is recorded once, not once per arriving pod.
		p.events.gang(&spec, nil, corev1.EventTypeNormal, ReasonGangWaiting,
			fmt.Sprintf("gang %s has fewer than its minMember %d pods; waiting for the rest", key, spec.MinMember))
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s has %d of its minMember %d pods; waiting for the rest", key, n, spec.MinMember))
	}
	st.capacity = true
	p.notePartlyBound(ctx, &spec, pod, members)
	if spec.Topology == nil {
		return nil, nil
	}
	pl, status := p.planFor(ctx, pod, &spec, members, nodes)
	if status != nil {
		if status.Code() == fwk.UnschedulableAndUnresolvable {
			p.events.gang(&spec, pod, corev1.EventTypeWarning, ReasonGangWaiting, status.Message())
		}
		return nil, status
	}
	st.plan = pl
	if pl.nodes == nil { // the whole cluster
		return nil, nil
	}
	return &fwk.PreFilterResult{NodeNames: pl.nodes}, nil
}

// ReasonUpstreamPodGroup prefixes the refusal of a pod in an upstream Workload API pod group.
const ReasonUpstreamPodGroup = "UpstreamPodGroupNotSupported"

// refuseUpstreamGroup turns away a pod of an upstream Workload API pod group (spec.schedulingGroup).
// HyperTopology cannot see the group (its gang policy and topology constraints are in
// scheduling.k8s.io PodGroup/Workload objects this scheduler does not read), and placing the pod
// alone would break the group's all-or-nothing guarantee; so no pod of such a group is ever bound.
// UnschedulableAndUnresolvable makes kube-scheduler set the pod's PodScheduled condition to False
// (reason Unschedulable) and record a FailedScheduling Event, both carrying this message; the pod
// is not retried by preemption. spec.schedulingGroup is immutable, so the answer never changes.
func refuseUpstreamGroup(ctx context.Context, pod *corev1.Pod, group string) *fwk.Status {
	msg := fmt.Sprintf("%s: the pod belongs to the Kubernetes Workload API pod group %q (spec.schedulingGroup, scheduling.k8s.io); "+
		"hyperbatch-scheduler does not place those groups and will not bind their pods one by one. "+
		"Use a Volcano PodGroup instead (the %s annotation, without spec.schedulingGroup), "+
		"or the default scheduler with its GangScheduling feature for scheduling.k8s.io groups",
		ReasonUpstreamPodGroup, group, gang.GroupNameAnnotation)
	klog.FromContext(ctx).V(2).Info("Refusing a pod of an upstream pod group", "pod", klog.KObj(pod), "podGroup", group)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// notePartlyBound reports a gang with some but fewer than minMember pods bound and nothing in
// flight (no reservation waiting at Permit or binding): a binding failed after Permit allowed the
// gang, or the scheduler restarted between binding the first and the last member. The gang is
// completed, not rolled back: the bound pods may already run (and the workload's own controller,
// not the scheduler, owns their lifecycle), and the remaining pods are placed next to them, inside
// the lowest HyperNode holding the bound ones and within the hard limit (see planFor). Completion
// cannot always succeed (the bound pods may already exceed the limit, or the domain is full); the
// pods' condition then says why, and the Event stays as the pointer to the partly bound state.
func (p *Plugin) notePartlyBound(ctx context.Context, spec *gang.Spec, pod *corev1.Pod, members []*corev1.Pod) {
	bound := 0
	for _, m := range members {
		if m.Spec.NodeName != "" {
			bound++
		}
	}
	if bound == 0 || int32(bound) >= spec.MinMember || len(p.tracker.Assumed(spec.Key)) > 0 {
		return
	}
	msg := fmt.Sprintf("gang %s has %d of its minMember %d pods bound and none reserved (a binding failed or the scheduler restarted); completing it: the other %d pod(s) are placed next to the bound ones",
		spec.Key, bound, spec.MinMember, int(spec.MinMember)-bound)
	klog.FromContext(ctx).V(2).Info("Completing a partly bound gang", "gang", spec.Key, "bound", bound, "minMember", spec.MinMember, "pod", klog.KObj(pod))
	p.events.gang(spec, pod, corev1.EventTypeWarning, ReasonGangPartlyBound, msg)
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// planFor returns the gang's cached plan when still valid, otherwise chooses the domain.
func (p *Plugin) planFor(ctx context.Context, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod, nodes []fwk.NodeInfo) (*plan, *fwk.Status) {
	var out *plan
	var status *fwk.Status
	p.tree.Read(func(t topology.Tree) {
		if ok, why := t.Ready(); !ok {
			status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s waits: the HyperNode tree is not usable: %s", spec.Key, why))
			return
		}
		if spec.Topology != nil && t.Len() == 0 {
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
			status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s (%s) waits: %v", spec.Key, limit.Describe, err))
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
	placed := p.tracker.Placed(spec.Key, members)
	nodeSet := map[string]struct{}{}
	for _, n := range placed {
		nodeSet[n] = struct{}{}
	}
	for n := range nodeSet {
		req.Placed = append(req.Placed, n)
	}
	sort.Strings(req.Placed)
	req.Demand = p.demand(pod, spec, members, placed)
	if req.Demand.Eligible == nil {
		// Every pod to place has the current pod's node constraints.
		req.Eligible = eligibleFor(pod)
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
		for uid, a := range p.tracker.Assumed(spec.Key) {
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

// Filter keeps the pod inside its gang's domain (PreFilterResult already does for the normal path;
// the nominated-node and preemption paths only run filters).
func (p *Plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	st := readState(cs)
	if st == nil || st.plan == nil || st.plan.nodes == nil {
		return nil
	}
	if node := ni.Node(); node != nil && !st.plan.nodes.Has(node.Name) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node is outside %s chosen for gang %s", st.plan.describe, st.key))
	}
	return nil
}

// PostFilter runs when a gang pod found no node. It never preempts: gang-level preemption is not
// implemented, and evicting pods for one member of a gang that may not complete is wasteful. Instead
// it frees reservations so that gangs cannot block each other: an older gang takes the reservations
// of younger incomplete gangs when that makes it fit; otherwise the failing gang releases its own.
func (p *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	st := readState(cs)
	if st == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable) // not a gang pod: let DefaultPreemption act
	}
	if st.spec == nil || !st.capacity {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "gang incomplete; no reservations released")
	}
	logger := klog.FromContext(ctx)
	spec := st.spec
	p.dropPlan(st.key) // capacity changed under the plan, or there was none: plan again next time

	if msg, ok := p.releaseYounger(ctx, pod, spec); ok {
		logger.V(2).Info("Released younger gangs for an older one", "gang", spec.Key, "detail", msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	n := p.rejectWaiting(spec.Key, "", fmt.Sprintf("gang %s released its reservations: pod %s/%s found no node", spec.Key, pod.Namespace, pod.Name))
	msg := fmt.Sprintf("gang %s cannot be completed now", spec.Key)
	if n > 0 {
		msg += fmt.Sprintf("; released %d reserved pod(s) of the gang", n)
		p.events.gang(spec, pod, corev1.EventTypeWarning, ReasonGangReleased, msg)
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// gangOrder is the queue order of a gang: higher priority first, then older PodGroup, then key.
type gangOrder struct {
	key      gang.Key
	priority int32
	created  int64
}

func (a gangOrder) before(b gangOrder) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return a.key.String() < b.key.String()
}

// releaseYounger rejects the waiting pods of gangs queued after spec's gang when giving their
// reservations back lets spec's gang fit.
func (p *Plugin) releaseYounger(ctx context.Context, pod *corev1.Pod, spec *gang.Spec) (string, bool) {
	me := gangOrder{key: spec.Key, priority: corev1helpers.PodPriority(pod), created: spec.CreationTime.UnixNano()}
	freed := map[string]domain.Freed{}
	younger := map[gang.Key][]fwk.WaitingPod{}
	for k, wps := range p.waitingByGang() {
		if k == spec.Key || len(wps) == 0 {
			continue
		}
		o := gangOrder{key: k, priority: corev1helpers.PodPriority(wps[0].GetPod())}
		if pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name); err == nil {
			o.created = pg.CreationTimestamp.UnixNano()
		}
		if !me.before(o) {
			continue
		}
		assumed := p.tracker.Assumed(k)
		for _, wp := range wps {
			a, ok := assumed[wp.GetPod().UID]
			if !ok || a.Allowed {
				continue // allowed pods are binding: their capacity is not coming back
			}
			f := freed[a.Node]
			if f.Resources == nil {
				f.Resources = corev1.ResourceList{}
			}
			for n, q := range resourcehelper.PodRequests(wp.GetPod(), resourcehelper.PodResourcesOptions{}) {
				v := f.Resources[n]
				v.Add(q)
				f.Resources[n] = v
			}
			f.Pods++
			freed[a.Node] = f
		}
		younger[k] = wps
	}
	if len(younger) == 0 {
		return "", false
	}
	nodes, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "", false
	}
	members := p.members(spec.Key)
	var choice *domain.Choice
	var chooseErr error
	p.tree.Read(func(t topology.Tree) {
		if ok, _ := t.Ready(); !ok && spec.Topology != nil {
			chooseErr = errors.New("tree not ready")
			return
		}
		choice, _, chooseErr = p.choose(t, pod, spec, members, nodes, freed)
	})
	if chooseErr != nil || choice == nil {
		return "", false
	}
	var victims []string
	for k, wps := range younger {
		assumed := p.tracker.Assumed(k)
		inside := false
		for _, wp := range wps {
			if a, ok := assumed[wp.GetPod().UID]; ok && (choice.Root || choice.Nodes.Has(a.Node)) {
				inside = true
				break
			}
		}
		if !inside {
			continue
		}
		msg := fmt.Sprintf("gang %s released its reservations for older gang %s, which needs %s", k, spec.Key, domainName(choice))
		// Under the victim's gang lock, like every rejection (see Permit). The waiting list is read
		// again under the lock: the one above was taken without it, and Permit may have allowed
		// some of those pods since; allowed pods are never released (rejectWaitingLocked skips them).
		unlock := p.lockGang(k)
		n := p.rejectWaitingLocked(k, "", msg)
		unlock()
		if n == 0 {
			continue // the gang completed (or left) in the meantime
		}
		victims = append(victims, k.String())
		if pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name); err == nil {
			vs := gang.SpecOf(pg, nil)
			p.events.gang(&vs, nil, corev1.EventTypeWarning, ReasonGangReleased, msg)
		}
		p.dropPlan(k)
	}
	if len(victims) == 0 {
		return "", false
	}
	sort.Strings(victims)
	klog.FromContext(ctx).V(3).Info("Older gang reclaims reservations", "gang", spec.Key, "released", victims)
	return fmt.Sprintf("gang %s waits for younger gang(s) %s to release %s", spec.Key, strings.Join(victims, ", "), domainName(choice)), true
}

func domainName(c *domain.Choice) string {
	if c.Root {
		return "the cluster"
	}
	return fmt.Sprintf("HyperNode %s", c.HyperNode)
}
