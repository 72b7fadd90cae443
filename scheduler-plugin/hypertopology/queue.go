package hypertopology

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Event resources served by kube-scheduler's dynamic informers: <plural>.<version>.<group>.
const (
	hyperNodeResource fwk.EventResource = "hypernodes.v1alpha1.topology.volcano.sh"
	podGroupResource  fwk.EventResource = "podgroups.v1beta1.scheduling.volcano.sh"
)

// Less orders the queue in the one gang order (gangcontract.Order): higher priority first; then
// the older gang (see gangQueueTime; a pod without a gang counts from its first scheduling attempt);
// then by gang (or pod) namespace and name, gangs before lone pods of the same name, so one gang's
// pods stay together; then by pod name.
func (p *Plugin) Less(a, b fwk.QueuedPodInfo) bool {
	pa, pb := a.GetPodInfo().GetPod(), b.GetPodInfo().GetPod()
	oa, ga := p.queueOrder(pa, a)
	ob, gb := p.queueOrder(pb, b)
	if oa.Before(ob) {
		return true
	}
	if ob.Before(oa) {
		return false
	}
	if ga != gb {
		return ga
	}
	return pa.Name < pb.Name
}

// queueOrder is the pod's place in the gang order, and whether it is a gang pod. A pod's key must
// not change while it sits in the scheduler's heap, so a gang pod is always ordered by its gang,
// whether or not the PodGroup exists.
func (p *Plugin) queueOrder(pod *corev1.Pod, qi fwk.QueuedPodInfo) (gangcontract.Order, bool) {
	o := gangcontract.Order{Priority: corev1helpers.PodPriority(pod)}
	if k, ok := gang.KeyOf(pod); ok {
		o.Created, o.Namespace, o.Name = p.gangQueueTime(k, qi), k.Namespace, k.Name
		return o, true
	}
	o.Created, o.Namespace, o.Name = podQueueTime(qi), pod.Namespace, pod.Name
	return o, false
}

// podQueueTime is when the pod was first tried (or queued, before its first attempt).
func podQueueTime(qi fwk.QueuedPodInfo) time.Time {
	if ts := qi.GetInitialAttemptTimestamp(); ts != nil {
		return *ts
	}
	return qi.GetTimestamp()
}

// gangQueueTime is the gang's sort time, fixed the first time it is asked for: the PodGroup's
// creation time if the PodGroup exists then, else the asking pod's queue time. It is not updated
// when the PodGroup appears later (that would reorder pods already in the heap) and is forgotten
// with the PodGroup.
func (p *Plugin) gangQueueTime(k gang.Key, qi fwk.QueuedPodInfo) time.Time {
	p.mu.Lock()
	t, ok := p.queueTimes[k]
	p.mu.Unlock()
	if ok {
		return t
	}
	if pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name); err == nil {
		t = pg.CreationTimestamp.Time
	} else {
		t = podQueueTime(qi)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.queueTimes[k]; ok {
		return old // another caller stored it first
	}
	if p.queueTimes == nil {
		p.queueTimes = map[gang.Key]time.Time{}
	}
	p.queueTimes[k] = t
	return t
}

// EventsToRegister lists the events that may make a gang pod this plugin rejected schedulable.
func (p *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// Reservations given back (a gang released, an assumed pod forgotten) or running pods deleted.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: p.hintPodDelete},
		// New or changed nodes: capacity and HyperNode (label/regex) membership.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAllocatable | fwk.UpdateNodeTaint},
			QueueingHintFn: p.hintGangPod},
		{Event: fwk.ClusterEvent{Resource: hyperNodeResource, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.hintTopologyGang},
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: p.hintPodGroup},
	}, nil
}

func (p *Plugin) hintPodDelete(_ klog.Logger, pod *corev1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	deleted, ok := oldObj.(*corev1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil // an unscheduled pod frees nothing
	}
	// A gang waiting for its preemption's victims to leave is requeued once, when the last one goes:
	// an attempt while some remain cannot place it and only lengthens its backoff.
	if p.otherVictimsLeft(key, deleted) {
		return fwk.QueueSkip, nil
	}
	// A gang releasing its own reservations (the scheduler reports a forgotten assumed pod as an
	// assigned-pod delete) does not help itself. A real deletion of one of its bound pods does: a
	// replacement pod may now complete the gang.
	if k, ok := gang.KeyOf(deleted); ok && k == key && p.res.wasReleased(deleted.UID) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

func (p *Plugin) hintGangPod(_ klog.Logger, pod *corev1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	if _, ok := gang.KeyOf(pod); ok {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func (p *Plugin) hintTopologyGang(_ klog.Logger, pod *corev1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	pg, err := p.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// No PodGroup yet, so no topology to help: the PodGroup's Add event (hintPodGroup) requeues the pod.
		return fwk.QueueSkip, nil
	}
	if err != nil {
		// Not expected from the lister; the scheduler logs the error and requeues the pod.
		return fwk.Queue, fmt.Errorf("getting PodGroup %s: %w", key, err)
	}
	if gang.SpecOf(pg, pod).Topology == nil {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

func (p *Plugin) hintPodGroup(_ klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.KeyOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	m, err := meta.Accessor(newObj)
	if err != nil {
		// Cannot tell whose PodGroup it is: the scheduler logs the error and requeues the pod.
		return fwk.Queue, fmt.Errorf("PodGroup event object: %w", err)
	}
	if m.GetNamespace() == key.Namespace && m.GetName() == key.Name {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// onPodGroupUpdate passes on changes of what placement depends on (gang.PlacementKey), and leaving a
// held phase (enqueued, see PreEnqueue), only: other status updates must not re-activate pods or
// drop the gang's plan. The generation cannot tell: Volcano's PodGroup CRD has no status
// subresource, so every status write bumps it.
func (p *Plugin) onPodGroupUpdate(oldObj, obj interface{}) {
	if o, ok := oldObj.(*schedulingv1beta1.PodGroup); ok {
		if n, ok := obj.(*schedulingv1beta1.PodGroup); ok && o.UID == n.UID && gang.PlacementKey(o) == gang.PlacementKey(n) &&
			(!p.held(o.Status.Phase) || p.held(n.Status.Phase)) {
			return
		}
	}
	p.onPodGroup(obj)
}

// onPodGroup wakes the gang's pending pods when their PodGroup appears or changes.
func (p *Plugin) onPodGroup(obj interface{}) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		return
	}
	key := gang.Key{Namespace: pg.Namespace, Name: pg.Name}
	if c := p.getPlan(key); c != nil && (c.pgUID != pg.UID || c.pgKey != gang.PlacementKey(pg)) {
		p.dropPlan(key)
	}
	members := p.members(key)
	if int32(len(members)) >= max(pg.Spec.MinMember, 1) {
		p.activate(members)
	}
}

func (p *Plugin) onPodGroupDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pg, ok := obj.(*schedulingv1beta1.PodGroup); ok {
		key := gang.Key{Namespace: pg.Namespace, Name: pg.Name}
		p.dropPlan(key)
		p.res.dropHold(key)
		p.events.forget(key)
		p.placements.forget(key)
		p.mu.Lock()
		delete(p.queueTimes, key)
		p.mu.Unlock()
		// The gang is gone: its members waiting at Permit give their nodes back now instead of at the
		// Permit timeout. (No Event: its subject is deleted; the pods' FailedScheduling carries it.)
		if n := p.rejectWaiting(key, "", fmt.Sprintf("PodGroup %s was deleted; the gang's reservations are released", key)); n > 0 {
			klog.Background().V(2).Info("Released the reservations of a deleted PodGroup", "plugin", Name, "gang", key, "pods", n)
		}
	}
}

// watchTree reacts to HyperNode tree changes for gangs waiting at Permit: a gang whose domain no
// longer exists, no longer holds its reserved nodes, or whose tree became invalid, is released and
// re-planned; when the tree becomes usable, pending gang pods are woken up.
func (p *Plugin) watchTree(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	wasReady := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.tree.Changed():
		case <-time.After(5 * time.Second): // informer sync completes without a tree change
		}
		select { // coalesce bursts (initial lists, controllers rewriting many HyperNodes)
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		ready := false
		p.tree.Read(func(t topology.Tree) { ready, _ = t.Ready() })
		if ready && !wasReady {
			p.activateTopologyGangs()
		}
		wasReady = ready
		p.revalidateWaiting(logger)
	}
}

// activateTopologyGangs moves every pending gang pod back to the active queue.
func (p *Plugin) activateTopologyGangs() {
	m := map[string]*corev1.Pod{}
	for _, o := range p.pods.List() {
		if pod, ok := o.(*corev1.Pod); ok && pod.Spec.NodeName == "" {
			if _, ok := gang.KeyOf(pod); ok {
				m[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	if len(m) > 0 {
		p.handle.Activate(klog.Background(), m)
	}
}

// revalidateWaiting checks every gang with pods waiting at Permit against the current tree.
func (p *Plugin) revalidateWaiting(logger klog.Logger) {
	waiting := p.waitingByGang()
	if len(waiting) == 0 {
		return
	}
	type verdict struct {
		key gang.Key
		msg string
	}
	var release []verdict
	p.tree.Read(func(t topology.Tree) {
		ready, why := t.Ready()
		gen := t.Generation()
		for key := range waiting {
			// Every waiting gang, planned or not (no networkTopology, plan dropped, root plan): a
			// reservation on a node that has left the cluster can never run, and binding to it would
			// still succeed at the API, so the gang is re-planned without it.
			if n := p.vanishedNode(t, key); n != "" && t.Synced() {
				release = append(release, verdict{key, fmt.Sprintf("node %s left the cluster while the gang waited", n)})
				continue
			}
			// A reservation on a node the node controller found not Ready would bind the gang's
			// pods to a node that cannot run them; re-plan the gang while none of it is bound.
			if n, taint := p.notReadyReservation(key); n != "" {
				release = append(release, verdict{key, fmt.Sprintf("node %s became NotReady (%s) while the gang waited", n, taint)})
				continue
			}
			pl := p.getPlan(key)
			if pl == nil || pl.treeGen == gen {
				continue
			}
			if !ready {
				release = append(release, verdict{key, "the HyperNode tree became unusable: " + why})
				continue
			}
			if pl.root {
				// The root is not a fixed domain: when the tree grows a tier, the root's tier may
				// now exceed the gang's highestTierAllowed. Drop the plan so the next PreFilter
				// chooses again, with the limit check (the reservations held stay valid).
				p.dropPlan(key)
				continue
			}
			h := t.Get(pl.hyper)
			if h == nil || h.Tier != pl.tier {
				release = append(release, verdict{key, fmt.Sprintf("HyperNode %s was deleted or changed tier while the gang waited", pl.hyper)})
				continue
			}
			ok := true
			for _, a := range p.res.Assumed(key) {
				if !h.HasNode(a.Node) {
					ok = false
					release = append(release, verdict{key, fmt.Sprintf("node %s left HyperNode %s while the gang waited", a.Node, pl.hyper)})
					break
				}
			}
			if ok {
				nodes := map[string]struct{}{}
				h.EachNode(func(n string) { nodes[n] = struct{}{} })
				p.refreshPlan(key, pl, gen, nodes)
			}
		}
	})
	for _, v := range release {
		msg := fmt.Sprintf("gang %s released to re-plan: %s", v.key, v.msg)
		p.dropPlan(v.key)
		n := p.rejectWaiting(v.key, "", msg)
		logger.Info("Released waiting gang after a topology change", "gang", v.key, "pods", n, "reason", v.msg)
		// Re-plan now: not every change that releases a gang is a requeueing event (a node deletion
		// is not), and the released pods would otherwise sit in the unschedulable queue.
		p.activate(p.members(v.key))
		if pg, err := p.pgLister.PodGroups(v.key.Namespace).Get(v.key.Name); err == nil {
			s := gang.SpecOf(pg, nil)
			p.events.gang(&s, nil, corev1.EventTypeWarning, ReasonGangReleased, msg)
		}
	}
}

// notReadyReservation returns a node holding one of the gang's reservations that carries the node
// controller's node.kubernetes.io/unreachable or not-ready NoSchedule taint, which the reserved pod
// does not tolerate, with the taint; "" when there is none, or when Permit already allowed the gang
// (its pods are binding: they cannot be released, and a release must never split a gang).
func (p *Plugin) notReadyReservation(key gang.Key) (string, string) {
	if p.nodes == nil {
		return "", ""
	}
	res := p.res.Assumed(key)
	for _, a := range res {
		if a.Allowed {
			return "", ""
		}
	}
	logger := klog.Background()
	cmpOps := utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators)
	var hits []string
	taintOf := map[string]string{}
	for _, a := range res {
		if _, seen := taintOf[a.Node]; seen {
			continue
		}
		taintOf[a.Node] = ""
		node, err := p.nodes.Get(a.Node)
		if err != nil {
			continue // gone: vanishedNode's case once the tree sees it
		}
		for i := range node.Spec.Taints {
			t := &node.Spec.Taints[i]
			if t.Effect != corev1.TaintEffectNoSchedule || t.Key != corev1.TaintNodeUnreachable && t.Key != corev1.TaintNodeNotReady {
				continue
			}
			if !corev1helpers.TolerationsTolerateTaint(logger, a.Pod.Spec.Tolerations, t, cmpOps) {
				taintOf[a.Node] = t.Key + ":" + string(t.Effect)
				hits = append(hits, a.Node)
				break
			}
		}
	}
	if len(hits) == 0 {
		return "", ""
	}
	sort.Strings(hits)
	return hits[0], taintOf[hits[0]]
}

// vanishedNode returns a node holding one of the gang's reservations that the tree no longer knows
// (deleted), or "".
func (p *Plugin) vanishedNode(t topology.Tree, key gang.Key) string {
	var gone []string
	for _, a := range p.res.Assumed(key) {
		if !t.KnowsNode(a.Node) {
			gone = append(gone, a.Node)
		}
	}
	if len(gone) == 0 {
		return ""
	}
	sort.Strings(gone)
	return gone[0]
}

// refreshPlan moves a still-valid plan to the new tree generation (with the domain's current nodes;
// a spilled plan keeps its subset, less the nodes that left the domain).
func (p *Plugin) refreshPlan(key gang.Key, old *plan, gen int64, nodes map[string]struct{}) {
	np := *old
	np.treeGen = gen
	np.rooms = nil
	if nodes != nil {
		np.nodes = sets.New[string]()
		for n := range nodes {
			if !old.spilled || old.nodes.Has(n) {
				np.nodes.Insert(n)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plans[key] == old {
		p.plans[key] = &np
	}
}
