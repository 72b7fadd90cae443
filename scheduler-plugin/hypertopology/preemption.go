package hypertopology

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/preempt"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Gang preemption (PostFilter). A gang that fits in no domain its networkTopology allows, and
// that giving back younger gangs' reservations does not help, clears one domain: the victim chooser
// (package preempt) picks the domain of the lowest feasible tier with the cheapest victims, the
// domain chooser confirms that the gang fits there once they are gone, and the victims are evicted
// whole. The gang then holds the domain (reservations.go) until it binds.
//
// What it follows of Volcano (pkg/scheduler/actions/preempt and reclaim, v1.14): a preemptor only
// takes pods of lower priority (Volcano's priority plugin); a gang of another queue is taken only
// when that queue is reclaimable (spec.reclaimable, default true; Volcano's reclaim action). What
// it does not follow: Volcano's gang plugin keeps a victim job at its minAvailable and evicts single
// tasks, here a victim gang is always evicted whole; the proportion plugin's deserved/overused
// shares are not checked (a reclaimable queue's gangs are taken whatever its share); and Volcano's
// preempt only runs for jobs of one queue while here any queue's gang may preempt, within the
// reclaimable rule.

// preemptionHoldSlack is how long a hold outlives its victims' longest grace period: time for the
// kubelet to stop them and for the gang to be placed.
const preemptionHoldSlack = 2 * time.Minute

// preemptionBudget bounds the exact victim search per domain (preempt.Request.Budget).
const preemptionBudget = 4096

const (
	// reasonPreempted is the Event reason on victim pods (as DefaultPreemption's).
	reasonPreempted = "Preempted"
	// disruptionReason is the DisruptionTarget condition's reason (as DefaultPreemption's).
	disruptionReason = "PreemptionByScheduler"
)

// preemptionPossible says whether the gang may preempt at all, and why not.
func preemptionPossible(pod *corev1.Pod) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, "its pods' preemptionPolicy is Never"
	}
	return true, ""
}

// victimsLeft reports, for a gang whose preemption holds a domain, how many victims are still
// there (0: the room is cleared).
func (p *Plugin) victimsLeft(h *hold) int {
	left := 0
	for key, uid := range h.victims {
		if obj, ok, err := p.pods.GetByKey(key); err == nil && ok {
			if pod, ok := obj.(*corev1.Pod); ok && pod.UID == uid {
				left++
			}
		}
	}
	return left
}

// otherVictimsLeft reports whether deleted is a victim of gang key's preemption and other victims
// of it are still there (the hint for assigned-pod deletes: requeue the gang at its last victim).
func (p *Plugin) otherVictimsLeft(key gang.Key, deleted *corev1.Pod) bool {
	h := p.res.holdOf(key, time.Now())
	if h == nil {
		return false
	}
	gone := deleted.Namespace + "/" + deleted.Name
	if uid, ok := h.victims[gone]; !ok || uid != deleted.UID {
		return false
	}
	for k, uid := range h.victims {
		if k == gone {
			continue
		}
		if obj, ok, err := p.pods.GetByKey(k); err == nil && ok {
			if pod, ok := obj.(*corev1.Pod); ok && pod.UID == uid {
				return true
			}
		}
	}
	return false
}

// preempt tries to clear one domain for the gang; it returns the status message and whether it
// evicted (or the gang is waiting for earlier victims to leave).
func (p *Plugin) preempt(ctx context.Context, pod *corev1.Pod, spec *gang.Spec) (string, bool) {
	logger := klog.FromContext(ctx)
	now := time.Now()
	if h := p.res.holdOf(spec.Key, now); h != nil {
		if left := p.victimsLeft(h); left > 0 {
			return fmt.Sprintf("gang %s waits for %d preempted pod(s) to leave %s", spec.Key, left, h.domain), true
		}
		return "", false // the room is clear, yet the gang did not fit: plan again without preempting twice
	}
	if ok, why := preemptionPossible(pod); !ok {
		return fmt.Sprintf("gang %s does not preempt: %s", spec.Key, why), false
	}
	prio := corev1helpers.PodPriority(pod)
	nodes, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fmt.Sprintf("gang %s cannot preempt: %v", spec.Key, err), false
	}
	members := p.members(spec.Key)
	units, skipped := p.victimUnits(spec, prio, nodes)
	budgets := p.pdbBudgets(units)
	var res *preempt.Result
	var why string
	p.tree.Read(func(t topology.Tree) {
		if ok, reason := t.Ready(); !ok && spec.Topology != nil {
			why = "the HyperNode tree is not usable: " + reason
			return
		}
		req, limit, err := p.preemptRequest(t, pod, spec, members)
		if err != nil {
			why = err.Error()
			return
		}
		req.Held = p.res.allHeld(spec.Key, now)
		req.Now = now
		req.Budgets = budgets
		if len(units) == 0 {
			why = fmt.Sprintf("no running pod has a priority below %d (pods of equal or higher priority are never preempted)", prio)
			return
		}
		r, err := preempt.Choose(t, nodes, units, req)
		if err != nil {
			why = err.Error()
			return
		}
		// The domain chooser must agree: with the victims gone the gang fits (in that domain).
		c, _, err := p.choose(t, pod, spec, members, nodes, r.Freed)
		if err != nil {
			why = fmt.Sprintf("clearing %s would still not let the domain chooser place the gang (%s): %v", r.Describe(), limit.Describe, err)
			return
		}
		if !r.Root && c.HyperNode != r.HyperNode && !t.Get(r.HyperNode).Contains(t.Get(c.HyperNode)) {
			why = fmt.Sprintf("clearing %s would let the gang be placed in %s instead; not preempting", r.Describe(), domainName(c))
			return
		}
		res = r
	})
	if res == nil {
		msg := fmt.Sprintf("gang %s (priority %d) cannot preempt: %s", spec.Key, prio, why)
		if skipped != "" {
			msg += "; " + skipped
		}
		return msg, false
	}
	p.evict(ctx, pod, spec, prio, res, now)
	logger.V(2).Info("Gang preempts", "gang", spec.Key, "domain", res.Describe(), "victimUnits", len(res.Victims), "victimPods", res.VictimPods(), "cost", res.Cost.String(), "exact", res.Exact, "domainsChecked", res.Domains)
	return fmt.Sprintf("gang %s preempts %d pod(s) of %d victim(s) in %s%s; waiting for them to leave", spec.Key, res.VictimPods(), len(res.Victims), res.Describe(), pdbNote(res)), true
}

// pdbNote reports the PodDisruptionBudget violations of a choice ("" for none): the chooser takes
// such a domain only when every feasible domain of the tier violates some.
func pdbNote(res *preempt.Result) string {
	if res.Cost.PDBViolations == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of the pods violate a PodDisruptionBudget: no domain of that tier could be cleared without)", res.Cost.PDBViolations)
}

// preemptRequest is the victim chooser's request for the gang: the same demand, limit, anchor and
// node eligibility as its domain choice.
func (p *Plugin) preemptRequest(t topology.Tree, pod *corev1.Pod, spec *gang.Spec, members []*corev1.Pod) (preempt.Request, gang.Limit, error) {
	req := preempt.Request{MaxCandidatesPerTier: int(*p.args.MaxCandidatesPerTier), Budget: preemptionBudget}
	limit := gang.Limit{Describe: "no network topology"}
	if spec.Topology != nil {
		var err error
		limit, err = spec.Topology.Resolve(t.HasTierName)
		if err != nil {
			return req, limit, err
		}
		req.Topology, req.Limit = true, limit
	}
	placed := p.res.Placed(spec.Key, members)
	nodeSet := sets.New[string]()
	for _, n := range placed {
		nodeSet.Insert(n)
	}
	req.Placed = sets.List(nodeSet)
	if len(spec.SubGroups) > 0 || spec.SubGroupErr != nil {
		// Room in the gang's own shape: the victim set must let its required sub-groups fit whole.
		groups, shape, eligible, err := groupDemand(t, pod, spec, members, placed)
		if err != nil {
			return req, limit, err
		}
		req.Pods, req.Groups, req.Eligible = []corev1.ResourceList{shape}, groups, eligible
		return req, limit, nil
	}
	d := p.demand(pod, spec, members, placed)
	req.Pods, req.Min = d.Pods, d.Min
	req.Eligible = eligibleFor(pod)
	return req, limit, nil
}

// victimUnits lists the units the gang may evict: whole gangs and lone pods bound to a node, of
// lower priority, not being deleted, and (for gangs of another queue) in a reclaimable queue. The
// string says what was left out for the queue rule, for the message when nothing can be cleared.
func (p *Plugin) victimUnits(spec *gang.Spec, prio int32, nodes []fwk.NodeInfo) ([]*preempt.Unit, string) {
	gangs := map[gang.Key]bool{}
	var units []*preempt.Unit
	var notReclaimable []string
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			v := pi.GetPod()
			if v.DeletionTimestamp != nil || corev1helpers.PodPriority(v) >= prio {
				continue
			}
			if k, ok := gang.KeyOf(v); ok {
				if k == spec.Key || gangs[k] {
					continue
				}
				gangs[k] = true
				if u, why := p.gangUnit(k, spec, prio); u != nil {
					units = append(units, u)
				} else if why != "" {
					notReclaimable = append(notReclaimable, why)
				}
				continue
			}
			units = append(units, &preempt.Unit{Key: v.Namespace + "/" + v.Name, Priority: corev1helpers.PodPriority(v), Pods: []preempt.Pod{p.victimPod(v)}})
		}
	}
	if len(notReclaimable) == 0 {
		return units, ""
	}
	sort.Strings(notReclaimable)
	if len(notReclaimable) > 3 {
		notReclaimable = append(notReclaimable[:3], "...")
	}
	return units, "not taken: " + strings.Join(notReclaimable, ", ")
}

// gangUnit is gang k as one victim: every bound member, wherever it runs; nil when any member has
// the preemptor's priority or more, or when k is of another queue that is not reclaimable.
func (p *Plugin) gangUnit(k gang.Key, spec *gang.Spec, prio int32) (*preempt.Unit, string) {
	pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name)
	if err == nil && p.queues != nil {
		mine := p.queueOf(spec.Key)
		if pg.Spec.Queue != mine {
			if q, err := p.queues.Get(queueName(pg.Spec.Queue)); err == nil && q.Spec.Reclaimable != nil && !*q.Spec.Reclaimable {
				return nil, fmt.Sprintf("gang %s (queue %s is not reclaimable)", k, q.Name)
			}
		}
	}
	u := &preempt.Unit{Key: k.String(), Gang: true}
	for _, m := range p.members(k) {
		if m.Spec.NodeName == "" {
			continue
		}
		mp := corev1helpers.PodPriority(m)
		if mp >= prio {
			return nil, ""
		}
		u.Priority = max(u.Priority, mp)
		if len(u.Pods) == 0 {
			u.Priority = mp
		}
		u.Pods = append(u.Pods, p.victimPod(m))
	}
	if len(u.Pods) == 0 {
		return nil, ""
	}
	return u, ""
}

// queueName is the Volcano queue of a PodGroup's spec.queue (empty means "default").
func queueName(q string) string {
	if q == "" {
		return "default"
	}
	return q
}

func (p *Plugin) queueOf(k gang.Key) string {
	if pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name); err == nil {
		return pg.Spec.Queue
	}
	return ""
}

func (p *Plugin) victimPod(v *corev1.Pod) preempt.Pod {
	vp := preempt.Pod{Namespace: v.Namespace, Name: v.Name, UID: v.UID, Node: v.Spec.NodeName,
		Requests: resourcehelper.PodRequests(v, resourcehelper.PodResourcesOptions{})}
	if v.Status.StartTime != nil {
		vp.Started = v.Status.StartTime.Time
	} else {
		vp.Started = v.CreationTimestamp.Time
	}
	return vp
}

// pdbBudgets marks each victim pod with the PodDisruptionBudgets it counts against (Pod.Budgets),
// matched the way DefaultPreemption matches them: same namespace, a non-empty selector that selects
// the pod's labels, the pod not already in the budget's status.disruptedPods. It returns each marked
// budget's status.disruptionsAllowed (preempt.Request.Budgets): the chooser charges a victim set
// against the budgets as one, so two victim units under one budget share its allowance.
func (p *Plugin) pdbBudgets(units []*preempt.Unit) []int32 {
	if p.pdbs == nil {
		return nil
	}
	pdbs, err := p.pdbs.List(labels.Everything())
	if err != nil || len(pdbs) == 0 {
		return nil
	}
	sels := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() {
			sels[i] = sel
		}
	}
	index := map[int]int{} // pdbs index → budget index
	var allowed []int32
	for _, u := range units {
		for i := range u.Pods {
			v := &u.Pods[i]
			obj, ok, err := p.pods.GetByKey(v.Namespace + "/" + v.Name)
			if err != nil || !ok {
				continue
			}
			pod := obj.(*corev1.Pod)
			for j, pdb := range pdbs {
				if sels[j] == nil || pdb.Namespace != pod.Namespace || !sels[j].Matches(labels.Set(pod.Labels)) {
					continue
				}
				if _, disrupted := pdb.Status.DisruptedPods[pod.Name]; disrupted {
					continue // already counted by the disruption controller
				}
				k, seen := index[j]
				if !seen {
					k = len(allowed)
					index[j] = k
					allowed = append(allowed, pdb.Status.DisruptionsAllowed)
				}
				v.Budgets = append(v.Budgets, k)
			}
		}
	}
	return allowed
}

// evict records the hold, then marks and deletes the victims (in the background: the scheduling
// cycle does not wait for the API server; the hold keeps the room meanwhile).
func (p *Plugin) evict(ctx context.Context, pod *corev1.Pod, spec *gang.Spec, prio int32, res *preempt.Result, now time.Time) {
	h := &hold{domain: res.Describe(), priority: prio, victims: map[string]types.UID{}}
	var grace int64
	var victims []*corev1.Pod
	var names []string
	for _, u := range res.Victims {
		names = append(names, u.Key)
		for _, vp := range u.Pods {
			obj, ok, err := p.pods.GetByKey(vp.Namespace + "/" + vp.Name)
			if err != nil || !ok {
				continue
			}
			v := obj.(*corev1.Pod)
			if v.UID != vp.UID {
				continue
			}
			h.victims[v.Namespace+"/"+v.Name] = v.UID
			victims = append(victims, v)
			if v.Spec.TerminationGracePeriodSeconds != nil {
				grace = max(grace, *v.Spec.TerminationGracePeriodSeconds)
			}
		}
	}
	p.tree.Read(func(t topology.Tree) {
		if res.Root {
			h.nodes = sets.New[string]()
			for n := range res.Freed {
				h.nodes.Insert(n)
			}
			return
		}
		if hn := t.Get(res.HyperNode); hn != nil {
			h.nodes = sets.New(hn.NodeNames()...)
		}
	})
	h.expires = now.Add(time.Duration(grace)*time.Second + preemptionHoldSlack)
	p.res.setHold(spec.Key, h)
	p.dropPlan(spec.Key)

	preemptions.Inc()
	victimsPerPreemption.Observe(float64(len(victims)))
	clearedTier.WithLabelValues(tierLabel(res)).Inc()

	list := strings.Join(names, ", ")
	if len(names) > 8 {
		list = strings.Join(names[:8], ", ") + fmt.Sprintf(", and %d more", len(names)-8)
	}
	p.events.gang(spec, pod, corev1.EventTypeNormal, gangcontract.ReasonGangPreempting,
		fmt.Sprintf("preempting %d pod(s) of %d victim(s) to clear %s: %s%s", len(victims), len(res.Victims), res.Describe(), list, pdbNote(res)))
	msg := fmt.Sprintf("preempted by gang %s (priority %d) to clear %s", spec.Key, prio, res.Describe())
	for _, u := range res.Victims {
		if !u.Gang {
			continue
		}
		ns, name, _ := strings.Cut(u.Key, "/")
		if pg, err := p.pgLister.PodGroups(ns).Get(name); err == nil {
			vs := gang.SpecOf(pg, nil)
			p.events.gang(&vs, nil, corev1.EventTypeWarning, gangcontract.ReasonGangPreempted,
				fmt.Sprintf("all %d bound pod(s) of the gang are %s", len(u.Pods), msg))
		}
	}
	logger := klog.FromContext(ctx).WithValues("gang", spec.Key)
	go evictVictims(p.handle.ClientSet(), p.handle.EventRecorder(), logger, pod, msg, victims)
}

// evictionConcurrency bounds the victims one preemption evicts at once (each eviction is two API
// calls: the DisruptionTarget condition, then the delete). DefaultPreemption also evicts a
// candidate's victims in parallel (16 at a time); one at a time, 8 victims took about 8 s under
// load and the preemptor waited for the last.
const evictionConcurrency = 16

// evictVictims marks and deletes the victims, evictionConcurrency at a time, and returns when every
// eviction has been tried. Each victim gets the DisruptionTarget condition and is deleted with its
// UID as precondition (a pod recreated under the same name is not touched), then a Preempted Event
// naming the preemptor. Failures are logged; the hold's expiry bounds how long the gang waits for a
// victim that could not be deleted.
func evictVictims(cs kubernetes.Interface, rec events.EventRecorder, logger klog.Logger, preemptor *corev1.Pod, msg string, victims []*corev1.Pod) {
	forEachBounded(victims, evictionConcurrency, func(v *corev1.Pod) { evictVictim(cs, rec, logger, preemptor, msg, v) })
}

// forEachBounded runs fn on every pod, at most limit at once, and returns when all have returned.
func forEachBounded(pods []*corev1.Pod, limit int, fn func(*corev1.Pod)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, v := range pods {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(v)
		}()
	}
	wg.Wait()
}

func evictVictim(cs kubernetes.Interface, rec events.EventRecorder, logger klog.Logger, preemptor *corev1.Pod, msg string, v *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: disruptionReason,
		Message: "hyperbatch-scheduler: " + msg, LastTransitionTime: metav1.Now()}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if _, err := cs.CoreV1().Pods(v.Namespace).Patch(ctx, v.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		logger.Error(err, "Could not set the DisruptionTarget condition on a victim", "pod", klog.KObj(v))
	}
	uid := v.UID
	if err := cs.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		logger.Error(err, "Could not delete a victim", "pod", klog.KObj(v))
	} else if rec != nil {
		rec.Eventf(v, preemptor, corev1.EventTypeNormal, reasonPreempted, "Preempting", "%s", msg)
	}
}

func tierLabel(r *preempt.Result) string {
	if r.Root {
		return "cluster"
	}
	return fmt.Sprint(r.Tier)
}

// heldEligible wraps a node predicate so that nodes held for another gang's preemption are not used.
func heldEligible(base func(*corev1.Node) bool, held sets.Set[string]) func(*corev1.Node) bool {
	if held.Len() == 0 {
		return base
	}
	return func(n *corev1.Node) bool {
		if held.Has(n.Name) {
			return false
		}
		return base == nil || base(n)
	}
}
