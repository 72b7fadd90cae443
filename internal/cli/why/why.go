// Package why is `kubectl hyperbatch why <gang>`: the decision about a gang, in the numbers the
// deciders recorded. The Queue side is the PodGroup status controller's (its phase and
// Unschedulable condition) with the Queue's state, capability and the gangs holding its
// reservations; the placement side is hyperbatch-scheduler's hyperbatch.dev/placement annotation
// (gangcontract.Placement: per tier the best domain, its free capacity against the need and the
// binding constraint, and the smallest changes). Deadlines of the gangs in the way are the
// lifecycle controller's (the registry's clock, workload.VCJobStart, and the active-deadline annotation) or
// the pods' own activeDeadlineSeconds. Nothing here decides again.
package why

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/cli/topology"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// Kind is the report's kind in its JSON and YAML forms.
const Kind = "WhyReport"

// Report is the command's result.
type Report struct {
	metav1.TypeMeta `json:",inline"`
	Gang            string `json:"gang"`
	// Owner is the workload the PodGroup belongs to ("VolcanoJob default/train"), "" when none.
	Owner     string `json:"owner,omitempty"`
	Phase     string `json:"phase"`
	MinMember int32  `json:"minMember"`
	// Placed counts the gang's pods bound to a node and not finished.
	Placed int `json:"placed"`
	// Scheduled: minMember pods are placed (the gang is not waiting).
	Scheduled bool `json:"scheduled"`
	// Domain is the lowest HyperNode holding the placed pods.
	Domain string     `json:"domain,omitempty"`
	Queue  QueueState `json:"queue"`
	// Waiting is the PodGroup's Unschedulable condition (the status controller's enqueue decision,
	// or the scheduler's GangWaiting message it copies), nil when it has none that is True.
	Waiting *Condition `json:"waiting,omitempty"`
	// Placement is the scheduler's hyperbatch.dev/placement annotation, nil when it has written none
	// (the gang is not enqueued, has no network topology, or was placed).
	Placement *gangcontract.Placement `json:"placement,omitempty"`
	// PlacementError is why the annotation could not be read.
	PlacementError string `json:"placementError,omitempty"`
	// InTheWay are the gangs placed in the best allowed domain of the lowest tier, with their
	// deadlines where one is known.
	InTheWay []Holder `json:"inTheWay,omitempty"`
	// Taints are the NoSchedule and NoExecute taints (and cordons) on nodes of TaintsIn that the
	// gang's pods do not tolerate, each with its nodes; TaintsIn is the scheduler's best domain of
	// the lowest allowed tier, or the cluster when it has reported none, and TaintsInNodes its
	// number of nodes.
	Taints        []gangcontract.UntoleratedTaint `json:"taints,omitempty"`
	TaintsIn      string                          `json:"taintsIn,omitempty"`
	TaintsInNodes int                             `json:"taintsInNodes,omitempty"`
	// Preemption is what hyperbatch-scheduler last said about preempting for the gang, from its
	// Events on the PodGroup (nil when it said nothing, or the gang is placed).
	Preemption *Preemption `json:"preemption,omitempty"`
	// Changes are the smallest changes that would let the gang go on, in words.
	Changes []string `json:"changes"`
}

// Preemption is hyperbatch-scheduler's last word on preempting for a waiting gang: a
// GangPreempting Event (it evicts the victims it names to clear one domain), or a GangWaiting Event
// saying that it waits for its victims to leave, or why it does not or cannot preempt.
type Preemption struct {
	// Evicting: the scheduler is clearing a domain for the gang (GangPreempting, or waiting for the
	// preempted pods to leave).
	Evicting bool   `json:"evicting"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	// Time is when the scheduler last said it (RFC 3339).
	Time string `json:"time"`
	// SubGroups: the gang has a subGroupPolicy, so the victims were chosen in its shape (each
	// required sub-group fits whole inside one HyperNode its networkTopology allows, inside the
	// cleared domain, once they leave).
	SubGroups bool `json:"subGroups,omitempty"`
}

// QueueState is the gang's Volcano Queue.
type QueueState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Capability is spec.capability; empty for a Queue without one (unlimited).
	Capability map[string]string `json:"capability,omitempty"`
	// Reserved sums, over the resources of Capability, what the Queue's Inqueue and Running gangs
	// reserve (their prices, gangcontract.Price, as the status controller admits against them).
	Reserved map[string]string `json:"reserved,omitempty"`
	// Needs is this gang's price (gangcontract.Price): its minResources, raised to its Volcano Job's
	// pods' effective requests (a resource set only in limits counts).
	Needs map[string]string `json:"needs,omitempty"`
	// Holders are the Inqueue and Running gangs whose reservations count against Capability
	// (none listed for a Queue without one).
	Holders []Holder `json:"holders"`
	// Ahead are the Queue's Pending gangs ordered before this one (gangcontract.Order).
	Ahead []string `json:"ahead"`
}

// Holder is a gang holding capacity.
type Holder struct {
	Gang         string            `json:"gang"`
	Phase        string            `json:"phase"`
	MinResources map[string]string `json:"minResources,omitempty"`
	// Reserves is the gang's price (gangcontract.Price), what it holds of the Queue (Holders only).
	Reserves map[string]string `json:"reserves,omitempty"`
	// Pods on the domain's nodes (InTheWay only).
	Pods int `json:"pods,omitempty"`
	// EndsBy is the gang's deadline (RFC 3339) and DeadlineFrom where it comes from; empty when
	// no deadline is known.
	EndsBy       string `json:"endsBy,omitempty"`
	DeadlineFrom string `json:"deadlineFrom,omitempty"`
}

// Condition is a PodGroup condition.
type Condition struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// DeepCopyObject implements runtime.Object.
func (r *Report) DeepCopyObject() runtime.Object { return output.DeepCopy(r) }

// Waits reports whether the gang is not placed (the exit code's Attention).
func (r *Report) Waits() bool { return !r.Scheduled }

// Resolve finds the PodGroup of a gang argument: NAME or pg/NAME (a PodGroup), KIND/NAME for a gang
// kind of the registry whose row says CLI.Why (vcjob/NAME: the Volcano Job's PodGroup, jobset/NAME:
// the JobSet's; found by the PodGroup's controller reference the row names), pod/NAME (the pod's
// group-name annotation).
func Resolve(s *snapshot.Snapshot, namespace, arg string) (*schedulingv1beta1.PodGroup, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		kind, name = "podgroup", arg
	}
	byOwner := func(ownerAPIVersion, ownerKind, what string) (*schedulingv1beta1.PodGroup, string, error) {
		for i := range s.PodGroups {
			pg := &s.PodGroups[i]
			if pg.Namespace != namespace {
				continue
			}
			if ref := metav1.GetControllerOf(pg); ref != nil && ref.APIVersion == ownerAPIVersion && ref.Kind == ownerKind && ref.Name == name {
				return pg, fmt.Sprintf("%s %s/%s", what, namespace, name), nil
			}
		}
		return nil, "", exitcode.NotFoundf("no PodGroup in namespace %s belongs to %s %s (is it a gang, and has its controller created the PodGroup yet?)", namespace, what, name)
	}
	w, found := workload.ByName(kind)
	switch {
	case !found || !w.CLI.Why:
	case w.Kind == defaults.KindPodGroup:
		if pg := s.PodGroup(namespace, name); pg != nil {
			owner := ""
			if ref := metav1.GetControllerOf(pg); ref != nil {
				owner = ref.Kind + " " + namespace + "/" + ref.Name
			}
			return pg, owner, nil
		}
		return nil, "", exitcode.NotFoundf("PodGroup %s/%s not found", namespace, name)
	case w.Kind == defaults.KindPod:
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.Namespace == namespace && p.Name == name {
				g := p.Annotations[topology.GroupNameAnnotation]
				if g == "" {
					return nil, "", exitcode.NotFoundf("pod %s/%s belongs to no gang (no %s annotation)", namespace, name, topology.GroupNameAnnotation)
				}
				if pg := s.PodGroup(namespace, g); pg != nil {
					return pg, "Pod " + namespace + "/" + name, nil
				}
				return nil, "", exitcode.NotFoundf("pod %s/%s names PodGroup %s, which does not exist (the gang waits for it)", namespace, name, g)
			}
		}
		return nil, "", exitcode.NotFoundf("pod %s/%s not found", namespace, name)
	case w.Gang != nil:
		pg, owner, err := byOwner(w.Gang.OwnerAPIVersion, w.Gang.OwnerKind, w.Title)
		if err == nil || w.Gang.Via == "" {
			return pg, owner, err
		}
		// No PodGroup of its own: the gang of the same-named object it runs as (a TrainJob's JobSet).
		if via, ok := workload.Lookup(w.Gang.Via); ok && via.Gang != nil {
			if pg, owner, viaErr := byOwner(via.Gang.OwnerAPIVersion, via.Gang.OwnerKind, via.Title); viaErr == nil {
				return pg, fmt.Sprintf("%s %s/%s (as its %s)", w.Title, namespace, name, owner), nil
			}
		}
		return nil, "", err
	}
	return nil, "", exitcode.Usagef("%q: name a gang as NAME or pg/NAME (PodGroup), %s or pod/NAME", arg, strings.Join(gangForms(), ", "))
}

// gangForms are the KIND/NAME forms of the registry's gang kinds `why` resolves (vcjob/NAME ...).
func gangForms() []string {
	var out []string
	for _, w := range workload.All() {
		if w.CLI.Why && w.Gang != nil {
			out = append(out, w.CLI.Name+"/NAME")
		}
	}
	return out
}

// Build explains the gang's PodGroup pg from a snapshot of PodGroups and Queues (all namespaces),
// Pods, Nodes and HyperNodes (for the domains), Volcano Jobs and PriorityClasses. now is the
// reference time for deadlines.
func Build(s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup, owner string, now time.Time) *Report {
	key := pg.Namespace + "/" + pg.Name
	r := &Report{TypeMeta: output.Meta(Kind), Gang: key, Owner: owner, Phase: string(pg.Status.Phase), MinMember: pg.Spec.MinMember, Changes: []string{}}
	if c := apimeta.FindStatusCondition(podGroupConditions(pg), "Unschedulable"); c != nil && c.Status == metav1.ConditionTrue {
		r.Waiting = &Condition{Reason: c.Reason, Message: c.Message}
	}
	if v, ok := pg.Annotations[gangcontract.PlacementAnnotation]; ok {
		p, err := gangcontract.ParsePlacement(v)
		if err != nil {
			r.PlacementError = err.Error()
		} else {
			r.Placement = p
		}
	}
	topo := topology.Build(s, topology.Options{})
	for _, g := range topo.Gangs {
		if g.Name == key {
			r.Placed, r.Domain = g.Placed, g.Domain
		}
	}
	r.Scheduled = r.Placed >= int(max(pg.Spec.MinMember, 1)) || pg.Status.Phase == schedulingv1beta1.PodGroupRunning ||
		pg.Status.Phase == schedulingv1beta1.PodGroupCompleted
	if r.Scheduled {
		r.Placement = nil // a stale annotation the scheduler has not removed yet says nothing
	}
	deadlines := deadlinesOf(s)
	r.Queue = queueState(s, pg, deadlines)
	if r.Placement != nil {
		r.InTheWay = inTheWay(r.Placement, topo, key, deadlines)
	}
	if !r.Scheduled {
		noteTaints(r, s, pg, topo)
		r.Preemption = preemptionOf(s, pg)
	}
	r.Changes = changes(r, now)
	return r
}

// preemptionOf is the scheduler's last Event on the PodGroup about preempting for it: GangPreempting,
// or a GangWaiting that waits for preempted pods or says why it does not or cannot preempt. Events
// older than the PodGroup (a former gang of the same name) are not its.
func preemptionOf(s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup) *Preemption {
	var best *Preemption
	var at time.Time
	for i := range s.Events {
		e := &s.Events[i]
		o := e.InvolvedObject
		if o.Kind != "PodGroup" || o.Namespace != pg.Namespace || o.Name != pg.Name || (o.UID != "" && pg.UID != "" && o.UID != pg.UID) {
			continue
		}
		evicting := e.Reason == gangcontract.ReasonGangPreempting
		if !evicting && (e.Reason != gangcontract.ReasonGangWaiting || !preemptionWord(e.Message)) {
			continue
		}
		t := eventTime(e)
		if t.Before(pg.CreationTimestamp.Time) || (best != nil && !t.After(at)) {
			continue
		}
		evicting = evicting || strings.Contains(e.Message, "preempted pod(s) to leave") || strings.Contains(e.Message, " preempts ")
		best, at = &Preemption{Evicting: evicting, Reason: e.Reason, Message: e.Message, SubGroups: len(pg.Spec.SubGroupPolicy) > 0}, t
		if !t.IsZero() {
			best.Time = t.UTC().Format(time.RFC3339)
		}
	}
	return best
}

// preemptionWord reports whether a GangWaiting message is PostFilter's (preemption), not PreFilter's.
func preemptionWord(msg string) bool {
	for _, w := range []string{"cannot preempt", "does not preempt", " preempts ", "preempted pod(s) to leave"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// eventTime is when an Event last happened: lastTimestamp, eventTime (events.k8s.io), or
// firstTimestamp.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// noteTaints fills the taints that keep the gang's pods off nodes of its best domain (the cluster
// when the scheduler has reported none), matched against the tolerations of the gang's pods, or of
// its Volcano Job's first task while it has no pods.
func noteTaints(r *Report, s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup, topo *topology.Report) {
	tolerations, ok := topology.GangTolerations(s, pg.Namespace, pg.Name)
	if !ok {
		tolerations = vcjobTolerations(s, pg)
	}
	in, names := "the cluster", map[string]bool(nil)
	if r.Placement != nil {
		if t := r.Placement.BestAllowed(); t != nil {
			for _, d := range topo.Domains {
				if d.Name == t.Best {
					in, names = t.Best, map[string]bool{}
					for _, n := range d.Nodes {
						names[n] = true
					}
				}
			}
		}
	}
	var nodes []*corev1.Node
	for i := range s.Nodes {
		if names == nil || names[s.Nodes[i].Name] {
			nodes = append(nodes, &s.Nodes[i])
		}
	}
	r.Taints = gangcontract.UntoleratedTaints(nodes, tolerations, false)
	if len(r.Taints) > 0 {
		r.TaintsIn, r.TaintsInNodes = in, len(nodes)
	} else {
		r.Taints = nil
	}
}

// vcjobTolerations are the tolerations of the first task of the PodGroup's Volcano Job (nil when
// it has none).
func vcjobTolerations(s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup) []corev1.Toleration {
	ref := metav1.GetControllerOf(pg)
	if ref == nil || ref.Kind != "Job" {
		return nil
	}
	for i := range s.VolcanoJobs {
		j := &s.VolcanoJobs[i]
		if j.Namespace == pg.Namespace && j.Name == ref.Name && len(j.Spec.Tasks) > 0 {
			return j.Spec.Tasks[0].Template.Spec.Tolerations
		}
	}
	return nil
}

// excludedNodes counts the nodes any of the taints keeps the pods off.
func excludedNodes(taints []gangcontract.UntoleratedTaint) int {
	seen := map[string]bool{}
	for _, u := range taints {
		for _, n := range u.Nodes {
			seen[n] = true
		}
	}
	return len(seen)
}

// podGroupConditions converts the PodGroup's conditions for apimeta.
func podGroupConditions(pg *schedulingv1beta1.PodGroup) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(pg.Status.Conditions))
	for _, c := range pg.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

// deadline is a gang's known end.
type deadline struct {
	at   time.Time
	from string
}

// deadlinesOf knows, per gang, the earliest deadline: its Volcano Job's active-deadline annotation
// counted from the lifecycle controller's start (workload.VCJobStart), or its pods'
// spec.activeDeadlineSeconds counted from their start.
func deadlinesOf(s *snapshot.Snapshot) map[string]deadline {
	out := map[string]deadline{}
	note := func(gang string, d deadline) {
		if cur, ok := out[gang]; !ok || d.at.Before(cur.at) {
			out[gang] = d
		}
	}
	jobs := map[string]*batchv1alpha1.Job{}
	for i := range s.VolcanoJobs {
		jobs[s.VolcanoJobs[i].Namespace+"/"+s.VolcanoJobs[i].Name] = &s.VolcanoJobs[i]
	}
	for i := range s.PodGroups {
		pg := &s.PodGroups[i]
		ref := metav1.GetControllerOf(pg)
		if ref == nil || ref.Kind != "Job" {
			continue
		}
		j := jobs[pg.Namespace+"/"+ref.Name]
		if j == nil {
			continue
		}
		secs, err := strconv.ParseInt(j.Annotations[hbv1.ActiveDeadlineSecondsAnnotation], 10, 64)
		if err != nil || secs <= 0 {
			continue
		}
		if start := workload.VCJobStart(j); start != nil {
			note(pg.Namespace+"/"+pg.Name, deadline{at: start.Add(time.Duration(secs) * time.Second),
				from: fmt.Sprintf("Volcano Job %s: %s %d", j.Name, hbv1.ActiveDeadlineSecondsAnnotation, secs)})
		}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		g := p.Annotations[topology.GroupNameAnnotation]
		if g == "" || p.Spec.ActiveDeadlineSeconds == nil || p.Status.StartTime == nil {
			continue
		}
		note(p.Namespace+"/"+g, deadline{at: p.Status.StartTime.Add(time.Duration(*p.Spec.ActiveDeadlineSeconds) * time.Second),
			from: fmt.Sprintf("pod %s: activeDeadlineSeconds %d", p.Name, *p.Spec.ActiveDeadlineSeconds)})
	}
	return out
}

func queueState(s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup, deadlines map[string]deadline) QueueState {
	name := pg.Spec.Queue
	if name == "" {
		name = "default"
	}
	q := QueueState{Name: name, Holders: []Holder{}, Ahead: []string{}}
	queue := s.Queue(name)
	if queue == nil {
		q.State = "missing"
		return q
	}
	q.State = string(queue.Status.State)
	if q.State == "" {
		q.State = "Open (no state yet)"
	}
	reserved := map[corev1.ResourceName]*resource.Quantity{}
	if len(queue.Spec.Capability) > 0 {
		q.Capability = map[string]string{}
		for n, v := range queue.Spec.Capability {
			q.Capability[string(n)] = v.String()
			reserved[n] = resource.NewQuantity(0, v.Format)
		}
	}
	prio := map[string]int32{}
	for _, pc := range s.PriorityClasses {
		prio[pc.Name] = pc.Value
	}
	priority := func(class string) int32 { return prio[class] }
	q.Needs = quantities(gangcontract.Price(pg.Spec.MinResources, ownerJob(s, pg), priority))
	order := func(g *schedulingv1beta1.PodGroup) gangcontract.Order {
		return gangcontract.Order{Priority: prio[g.Spec.PriorityClassName], Created: g.CreationTimestamp.Time, Namespace: g.Namespace, Name: g.Name}
	}
	me := order(pg)
	pgs := append([]schedulingv1beta1.PodGroup(nil), s.PodGroups...)
	sort.SliceStable(pgs, func(i, j int) bool { return order(&pgs[i]).Before(order(&pgs[j])) })
	for i := range pgs {
		g := &pgs[i]
		gq := g.Spec.Queue
		if gq == "" {
			gq = "default"
		}
		if gq != name || (g.Namespace == pg.Namespace && g.Name == pg.Name) {
			continue
		}
		key := g.Namespace + "/" + g.Name
		switch g.Status.Phase {
		case schedulingv1beta1.PodGroupInqueue, schedulingv1beta1.PodGroupRunning:
			if q.Capability == nil {
				continue // an unlimited Queue: reservations hold nothing back
			}
			h := Holder{Gang: key, Phase: string(g.Status.Phase), MinResources: quantities(stated(g)), Reserves: map[string]string{}}
			for n, v := range gangcontract.Price(g.Spec.MinResources, ownerJob(s, g), priority) {
				h.Reserves[string(n)] = v.String()
				if sum := reserved[n]; sum != nil {
					sum.Add(v)
				}
			}
			if d, ok := deadlines[key]; ok {
				h.EndsBy, h.DeadlineFrom = d.at.UTC().Format(time.RFC3339), d.from
			}
			q.Holders = append(q.Holders, h)
		case schedulingv1beta1.PodGroupPending, "":
			if order(g).Before(me) {
				q.Ahead = append(q.Ahead, key)
			}
		}
	}
	if q.Capability != nil {
		q.Reserved = map[string]string{}
		for n, v := range reserved {
			q.Reserved[string(n)] = v.String()
		}
	}
	return q
}

// ownerJob is the Volcano Job that controls the PodGroup (same UID), nil when it has none or it is
// gone.
func ownerJob(s *snapshot.Snapshot, pg *schedulingv1beta1.PodGroup) *batchv1alpha1.Job {
	ref := metav1.GetControllerOf(pg)
	if ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, batchv1alpha1.SchemeGroupVersion.Group+"/") {
		return nil
	}
	for i := range s.VolcanoJobs {
		if j := &s.VolcanoJobs[i]; j.Namespace == pg.Namespace && j.UID == ref.UID {
			return j
		}
	}
	return nil
}

// stated is the PodGroup's spec.minResources (nil when unset).
func stated(pg *schedulingv1beta1.PodGroup) corev1.ResourceList {
	if pg.Spec.MinResources == nil {
		return nil
	}
	return *pg.Spec.MinResources
}

// quantities prints a resource list (nil when empty).
func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for n, v := range l {
		out[string(n)] = v.String()
	}
	return out
}

// inTheWay lists the gangs with pods in the best domain of the lowest allowed tier.
func inTheWay(p *gangcontract.Placement, topo *topology.Report, self string, deadlines map[string]deadline) []Holder {
	best := ""
	for _, t := range p.Tiers {
		if t.Allowed && t.Best != "" {
			best = t.Best
			break
		}
	}
	var nodes map[string]bool
	for _, d := range topo.Domains {
		if d.Name == best {
			nodes = map[string]bool{}
			for _, n := range d.Nodes {
				nodes[n] = true
			}
		}
	}
	var out []Holder
	for _, g := range topo.Gangs {
		if g.Name == self {
			continue
		}
		pods := 0
		for n, k := range g.Nodes {
			if nodes[n] {
				pods += k
			}
		}
		if pods == 0 {
			continue
		}
		h := Holder{Gang: g.Name, Phase: g.Phase, Pods: pods}
		if d, ok := deadlines[g.Name]; ok {
			h.EndsBy, h.DeadlineFrom = d.at.UTC().Format(time.RFC3339), d.from
		}
		out = append(out, h)
	}
	return out
}

// changes are the smallest changes, from the deciders' numbers.
func changes(r *Report, now time.Time) []string {
	var out []string
	if r.Scheduled {
		return []string{}
	}
	if pr := r.Preemption; pr != nil && pr.Evicting {
		shape := ""
		if pr.SubGroups {
			shape = " (victims chosen so that its required sub-groups fit whole, each in one HyperNode their networkTopology allows)"
		}
		out = append(out, fmt.Sprintf("wait: hyperbatch-scheduler is preempting for it%s: %s", shape, pr.Message))
	}
	if r.Waiting != nil && r.Waiting.Reason == "QueueCapabilityExceeded" {
		out = append(out, fmt.Sprintf("raise Queue %s's capability, or lower the gang's minResources (the status controller: %s)", r.Queue.Name, r.Waiting.Message))
		if h := earliest(r.Queue.Holders); h != nil {
			out = append(out, fmt.Sprintf("wait: %s holds a reservation in Queue %s and ends by %s (%s, %s from now)", h.Gang, r.Queue.Name, h.EndsBy, h.DeadlineFrom, until(h.EndsBy, now)))
		} else if len(r.Queue.Holders) > 0 {
			out = append(out, fmt.Sprintf("wait for one of the %d gangs holding Queue %s's reservations to finish (none has a deadline hyperbatch knows)", len(r.Queue.Holders), r.Queue.Name))
		}
	}
	if p := r.Placement; p != nil {
		for _, s := range p.Suggestions {
			switch s.Kind {
			case gangcontract.SuggestFewerPods:
				out = append(out, fmt.Sprintf("fewer pods: %s has room for %d of the %d pods still to place (minMember %d instead of %d)",
					s.Domain, s.Value, p.Need.Pods, int64(r.MinMember)-p.Need.Pods+s.Value, r.MinMember))
			case gangcontract.SuggestHigherTier:
				out = append(out, fmt.Sprintf("a higher tier: with highestTierAllowed %d, %s has room for all %d pods", s.Value, s.Domain, p.Need.Pods))
			}
		}
		out = append(out, subGroupChanges(r, p.SubGroups)...)
		if h := earliest(r.InTheWay); h != nil {
			out = append(out, fmt.Sprintf("wait: %s runs in %s and ends by %s (%s, %s from now)", h.Gang, bestAllowed(p), h.EndsBy, h.DeadlineFrom, until(h.EndsBy, now)))
		}
	}
	for _, u := range r.Taints {
		if u.NodeNotReady() {
			out = append(out, fmt.Sprintf("wait for %s to be Ready (%s on %d of the %d nodes of %s): %s", u.NodeNames(), u, len(u.Nodes), r.TaintsInNodes, r.TaintsIn, u.Remedy()))
			continue
		}
		out = append(out, fmt.Sprintf("tolerate %s (on %d of the %d nodes of %s): %s to the pods' spec.tolerations", u, len(u.Nodes), r.TaintsInNodes, r.TaintsIn, u.Remedy()))
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// subGroupChanges are what would let a gang's required sub-groups fit: fewer of them (the most one
// allowed domain holds whole), or the room one more of them needs in the best domain.
func subGroupChanges(r *Report, sg *gangcontract.SubGroupPlacement) []string {
	if sg == nil || sg.Size == 0 || len(sg.Domains) == 0 || sg.Holds >= sg.Required {
		return nil
	}
	best := sg.Domains[0]
	var out []string
	if sg.Holds > 0 {
		out = append(out, fmt.Sprintf("fewer sub-groups: %s holds %d of the %d required sub-groups of %d pods whole (minSubGroups at most %d, and minMember %d instead of %d)",
			best.HyperNode, sg.Holds, sg.Required, sg.Size, sg.Holds, int64(r.MinMember)-int64(sg.Required-sg.Holds)*sg.Size, r.MinMember))
	}
	var gapIn string
	var gap int64
	for _, room := range best.Rooms {
		if g := sg.Size - room.Room%sg.Size; gapIn == "" || g < gap {
			gapIn, gap = room.Name, g
		}
	}
	if gapIn != "" {
		pods := fmt.Sprintf("%d more pods", gap)
		if gap == 1 {
			pods = "1 more pod"
		}
		out = append(out, fmt.Sprintf("more room: %s free in %s (%s) would hold one more sub-group of %d pods inside %s",
			pods, gapIn, sg.Limit, sg.Size, best.HyperNode))
	}
	return out
}

func bestAllowed(p *gangcontract.Placement) string {
	for _, t := range p.Tiers {
		if t.Allowed {
			return t.Best
		}
	}
	return ""
}

func earliest(hs []Holder) *Holder {
	var best *Holder
	for i := range hs {
		if hs[i].EndsBy != "" && (best == nil || hs[i].EndsBy < best.EndsBy) {
			best = &hs[i]
		}
	}
	return best
}

func until(rfc3339 string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		return "?"
	}
	d := t.Sub(now).Round(time.Second)
	if d < 0 {
		return "overdue by " + (-d).String() + ";"
	}
	return d.String()
}

// WriteTable writes the decision in sections.
func (r *Report) WriteTable(w io.Writer) error {
	pw := output.Sticky(w)
	who := r.Gang
	if r.Owner != "" {
		who += " (" + r.Owner + ")"
	}
	state := "waits"
	if r.Scheduled {
		state = "is placed"
		if r.Domain != "" {
			state += " in " + r.Domain
		}
	}
	pw.Printf("Gang %s: phase %s, minMember %d, %d pods placed: it %s.\n", who, orNone(r.Phase), r.MinMember, r.Placed, state)

	q := r.Queue
	pw.Printf("\nQueue %s: %s", q.Name, q.State)
	if q.Capability == nil {
		pw.Println(", no capability (unlimited).")
	} else {
		pw.Printf(", capability %s; Inqueue and Running gangs reserve %s; this gang needs %s.\n", amounts(q.Capability), amounts(q.Reserved), amounts(q.Needs))
	}
	if len(q.Holders) > 0 {
		rows := [][]string{{"HOLDS A RESERVATION", "PHASE", "RESERVES", "ENDS BY"}}
		for _, h := range q.Holders {
			rows = append(rows, []string{h.Gang, h.Phase, amounts(h.Reserves), endsBy(h)})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if len(q.Ahead) > 0 {
		pw.Printf("Pending gangs ahead of it in the queue: %s\n", output.List(q.Ahead))
	}
	if r.Waiting != nil {
		pw.Printf("\nWaiting: %s: %s\n", r.Waiting.Reason, r.Waiting.Message)
	}
	if p := r.Placement; p != nil {
		names := resourceNames(p.Need)
		pw.Printf("\nPlacement (hyperbatch-scheduler at %s, %s): needs %d pods, %s.\n", p.Time, p.Limit, p.Need.Pods, amounts(p.Need.Resources))
		head := []string{"TIER", "ALLOWED", "CANDIDATES", "CHECKED", "BEST", "ROOM (PODS)"}
		for _, n := range names {
			head = append(head, "FREE "+n+"/NEED")
		}
		head = append(head, "NODES (ELIGIBLE)", "BINDING")
		rows := [][]string{head}
		for _, t := range p.Tiers {
			allowed := "yes"
			if !t.Allowed {
				allowed = "no"
			}
			row := []string{strconv.Itoa(t.Tier), allowed, strconv.Itoa(t.Candidates), strconv.Itoa(t.Evaluated), t.Best,
				fmt.Sprintf("%d/%d", t.BestRoom, p.Need.Pods)}
			for _, n := range names {
				row = append(row, quantity(t.BestFree.Resources[n])+"/"+quantity(p.Need.Resources[n]))
			}
			row = append(row, fmt.Sprintf("%d (%d)", t.Nodes, t.EligibleNodes), t.Binding)
			rows = append(rows, row)
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
		if sg := p.SubGroups; sg != nil {
			if err := writeSubGroups(w, pw, sg); err != nil {
				return err
			}
		}
		if len(r.InTheWay) > 0 {
			pw.Printf("Gangs placed in %s:\n", bestAllowed(p))
			rows := [][]string{{"GANG", "PHASE", "PODS THERE", "ENDS BY"}}
			for _, h := range r.InTheWay {
				rows = append(rows, []string{h.Gang, h.Phase, strconv.Itoa(h.Pods), endsBy(h)})
			}
			if err := output.Tab(w, rows); err != nil {
				return err
			}
		}
	} else if r.PlacementError != "" {
		pw.Printf("\nPlacement: %s\n", r.PlacementError)
	} else if !r.Scheduled {
		pw.Println("\nPlacement: hyperbatch-scheduler has not recorded numbers for this gang (it is not enqueued yet, has no networkTopology, or has not been tried).")
	}
	if len(r.Taints) > 0 {
		pw.Printf("\nTaints keep the gang's pods off %d of the %d nodes of %s:\n", excludedNodes(r.Taints), r.TaintsInNodes, r.TaintsIn)
		rows := [][]string{{"TAINT", "NODES", "TO ADMIT THE PODS"}}
		for _, u := range r.Taints {
			rows = append(rows, []string{u.String(), strconv.Itoa(len(u.Nodes)), u.Remedy()})
		}
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if pr := r.Preemption; pr != nil {
		pw.Printf("\nPreemption (hyperbatch-scheduler's %s Event at %s): %s\n", pr.Reason, orNone(pr.Time), pr.Message)
		if pr.SubGroups && pr.Evicting {
			pw.Println("The victims are whole gangs (or pods without one), chosen in the gang's shape: once they leave, each required sub-group fits whole inside one HyperNode its networkTopology allows, inside the cleared domain.")
		}
	}
	if len(r.Changes) > 0 {
		pw.Println("\nWhat would let it go on now:")
		for _, c := range r.Changes {
			pw.Printf("  - %s\n", c)
		}
	}
	return nil
}

// writeSubGroups says which of the required sub-groups fit where: per gang domain with room for
// their pods, how many it holds whole and the rooms of the HyperNodes their limit allows.
func writeSubGroups(w io.Writer, pw *output.StickyWriter, sg *gangcontract.SubGroupPlacement) error {
	if sg.Size == 0 {
		pw.Printf("Sub-groups: %d required, of different sizes or limits (the scheduler's message above says which does not fit).\n", sg.Required)
		return nil
	}
	pw.Printf("Sub-groups: %d required, %d pods each, each inside one HyperNode of %s; the most one allowed domain holds whole: %d.\n",
		sg.Required, sg.Size, sg.Limit, sg.Holds)
	if len(sg.Domains) == 0 {
		pw.Println("No allowed domain has room for the required sub-groups' pods.")
		return nil
	}
	rows := [][]string{{"DOMAIN", "TIER", "HOLDS", "ROOM (PODS) OF ITS HYPERNODES"}}
	for _, d := range sg.Domains {
		parts := make([]string, 0, len(d.Rooms))
		for _, room := range d.Rooms {
			parts = append(parts, fmt.Sprintf("%s %d", room.Name, room.Room))
		}
		rows = append(rows, []string{d.HyperNode, strconv.Itoa(d.Tier), fmt.Sprintf("%d/%d", d.Holds, sg.Required), strings.Join(parts, ", ")})
	}
	return output.Tab(w, rows)
}

func resourceNames(a gangcontract.Amounts) []string {
	var out []string
	for n := range a.Resources {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func amounts(m map[string]string) string {
	if len(m) == 0 {
		return "nothing"
	}
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = quantity(m[n]) + " " + n
	}
	return strings.Join(parts, ", ")
}

func endsBy(h Holder) string {
	if h.EndsBy == "" {
		return "no deadline known"
	}
	return h.EndsBy + " (" + h.DeadlineFrom + ")"
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

// quantity writes a Kubernetes quantity for people: "127900m" as "127.9", "" as "0".
func quantity(s string) string {
	if s == "" {
		return "0"
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return s
	}
	if q.MilliValue()%1000 == 0 {
		return strconv.FormatInt(q.Value(), 10)
	}
	return strconv.FormatFloat(float64(q.MilliValue())/1000, 'f', -1, 64)
}
