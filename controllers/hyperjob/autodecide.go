package hyperjob

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/autosplit"
	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// The decision of mode auto (docs/multicluster.md, "How `auto` decides"). A HyperJob whose plan has
// an undecided AutoRequest is decided here, one HyperJob at a time per controller process:
//
//  1. the candidate members are the Ready Clusters (cluster.karmada.io) the replicatedJobs allow;
//     a NotReady one, or one whose numbers cannot be read, is named in a refusal and gets nothing;
//  2. each candidate's numbers are read through Karmada's cluster proxy (automembers.go);
//  3. every other decided, unfinished HyperJob's children that the members' numbers do not show yet
//     (fewer pods bound than the child has) are reservations: two HyperJobs decided one after the
//     other never count the same free accelerators;
//  4. internal/autosplit decides; a decision is written once into the HyperJob's
//     hbv1.AutoSplitAnnotation (guarded by resourceVersion) with an Event, and the next pass builds
//     the children with a PropagationPolicy for exactly the decided cluster; a refusal becomes the
//     AutoSplit condition (False, NoSplitFits, with the numbers) and an Event, and the HyperJob is
//     decided again when a Cluster's readiness or resource summary changes, a HyperJob's child
//     finishes or goes, a HyperJob is deleted, or after autoRetry.

// autoRetry is how often a waiting HyperJob is decided again without any watch event: room made by
// something other than a HyperJob's child (another tenant's pods) shows no event on the plane,
// and Karmada writes a Cluster's status only when it changes (in the tests, no status write was
// seen for 40 s after a member's pod went).
const autoRetry = 15 * time.Second

// snapshotTTL is how long a member's numbers serve further decisions. Reusing them is safe: a
// child decided meanwhile is a reservation until a snapshot shows its pods, and pods that finished
// meanwhile only make the old numbers lower than the member's. It turns a burst of HyperJobs into
// one read per member instead of one per HyperJob.
const snapshotTTL = 2 * time.Second

// autoDecider serializes decisions and remembers the ones written until the cache shows them.
type autoDecider struct {
	mu      sync.Mutex
	members memberReader
	// snaps are the members' last numbers, by cluster and accelerator type (guarded by snapMu: a
	// Cluster's change drops them while a decision runs).
	snapMu sync.Mutex
	snaps  map[[2]string]timedSnapshot
	// ledger: decisions this process wrote, by HyperJob UID, until the cached HyperJob carries them
	// or the HyperJob is gone (dropped by its delete event, or by the first listing without it).
	// Guarded by ledgerMu, so a delete event never waits for a decision's member reads.
	ledgerMu sync.Mutex
	ledger   map[types.UID]ledgerEntry
	now      func() time.Time
}

type timedSnapshot struct {
	snap *memberSnapshot
	at   time.Time
}

// snapshot reads a member's numbers, or reuses ones read less than snapshotTTL ago.
func (d *autoDecider) snapshot(ctx context.Context, cluster string, res corev1.ResourceName) (*memberSnapshot, error) {
	key := [2]string{cluster, string(res)}
	d.snapMu.Lock()
	t, ok := d.snaps[key]
	d.snapMu.Unlock()
	if ok && d.now().Sub(t.at) < snapshotTTL {
		return t.snap, nil
	}
	at := d.now()
	s, err := d.members(ctx, cluster, res)
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	if err != nil {
		delete(d.snaps, key)
		return nil, err
	}
	d.snaps[key] = timedSnapshot{snap: s, at: at}
	return s, nil
}

// forget drops a member's numbers: its Cluster changed, the next decision reads it again.
func (d *autoDecider) forget(cluster string) {
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	for k := range d.snaps {
		if k[0] == cluster {
			delete(d.snaps, k)
		}
	}
}

type ledgerEntry struct {
	ns  string
	rec *autoRecord
}

// dropDeleted forgets the decision of a HyperJob that was deleted: its reservation goes with it at
// once. (A decision written while its HyperJob's delete event passes is dropped by the next
// listing, which no longer shows the HyperJob.)
func (d *autoDecider) dropDeleted(uid types.UID) {
	d.ledgerMu.Lock()
	defer d.ledgerMu.Unlock()
	delete(d.ledger, uid)
}

func newAutoDecider(m memberReader) *autoDecider {
	return &autoDecider{members: m, snaps: map[[2]string]timedSnapshot{}, ledger: map[types.UID]ledgerEntry{}, now: time.Now}
}

// autoOutcome is what decideAuto did.
type autoOutcome struct {
	// decided: the decision was written; the HyperJob's watch event brings the pass that builds the
	// children.
	decided bool
	// waiting is the refusal's message when no split fits.
	waiting string
}

// decideAuto decides hj's split (see above). The caller has checked that the cached HyperJob is
// current.
func (r *Reconciler) decideAuto(ctx context.Context, hj *trainingv1alpha1.HyperJob, req *AutoRequest) (autoOutcome, error) {
	d := r.auto
	d.mu.Lock()
	defer d.mu.Unlock()
	begin := d.now()
	members, snaps, err := r.readMembers(ctx, req)
	if err != nil {
		autoDecisions.WithLabelValues(resultError).Inc()
		return autoOutcome{}, err
	}
	reservations, err := r.reservations(ctx, hj, req.Resource, snaps)
	if err != nil {
		autoDecisions.WithLabelValues(resultError).Inc()
		return autoOutcome{}, err
	}
	dec, refusal := autosplit.Decide(members, autosplit.Request{Groups: req.Groups, MaxDomains: req.MaxDomains, Reservations: reservations})
	autoDecisionSeconds.Observe(d.now().Sub(begin).Seconds())
	if refusal != nil {
		autoDecisions.WithLabelValues(resultRefused).Inc()
		msg := refusal.Message
		// The Event only when the numbers changed: the condition holds the last ones.
		if c := apimeta.FindStatusCondition(hj.Status.Conditions, ConditionAutoSplit); c == nil || c.Message != waitingMessage(msg) {
			r.recorder.Event(hj, corev1.EventTypeWarning, ReasonNoSplitFits, waitingMessage(msg))
		}
		log.FromContext(ctx).V(1).Info("no auto split fits yet", "reason", msg)
		return autoOutcome{waiting: msg}, nil
	}
	rec := recordOf(dec, req)
	for _, m := range members {
		if m.Ready && m.LeftOut != "" {
			if rec.LeftOut == nil {
				rec.LeftOut = map[string]string{}
			}
			rec.LeftOut[m.Name] = m.LeftOut
		}
	}
	rec.Redecided = req.Redecided
	v, err := rec.encode()
	if err != nil {
		return autoOutcome{}, err
	}
	written, err := r.patchAnnotation(ctx, hj, hbv1.AutoSplitAnnotation, v, "auto split")
	if err != nil {
		autoDecisions.WithLabelValues(resultError).Inc()
		return autoOutcome{}, err
	}
	if !written {
		return autoOutcome{}, nil // someone changed the HyperJob meanwhile: its watch event brings the next pass
	}
	d.ledgerMu.Lock()
	d.ledger[hj.UID] = ledgerEntry{ns: hj.Namespace, rec: rec}
	d.ledgerMu.Unlock()
	autoDecisions.WithLabelValues(resultDecided).Inc()
	autoClusters.Observe(float64(len(dec.Clusters)))
	r.recorder.Eventf(hj, corev1.EventTypeNormal, ReasonAutoSplitDecided, "split %d children over %d member clusters: %s",
		len(rec.Children), len(dec.Clusters), strings.TrimPrefix(rec.conditionMessage(), "decided: "))
	return autoOutcome{decided: true}, nil
}

// readMembers lists the Clusters and reads each candidate's numbers. A candidate that is not Ready,
// or whose numbers cannot be read, is passed to autosplit as not Ready (named in a refusal).
//
// A Ready candidate is left out, with the reason in the decision and in a refusal, when Karmada would
// not place a child there (memberLeftOut) or Karmada refused the split there before (req.LeftOut).
func (r *Reconciler) readMembers(ctx context.Context, req *AutoRequest) ([]autosplit.Member, map[string]*memberSnapshot, error) {
	var clusters clusterv1alpha1.ClusterList
	if err := r.client.List(ctx, &clusters); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, nil, fmt.Errorf("listing Karmada's Clusters: %w", err)
	}
	var members []autosplit.Member
	snaps := map[string]*memberSnapshot{}
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if req.Candidates != nil && !slices.Contains(req.Candidates, c.Name) {
			continue
		}
		if !clusterReady(c) {
			members = append(members, autosplit.Member{Name: c.Name})
			continue
		}
		why := req.LeftOut[c.Name]
		if why == "" {
			why = memberLeftOut(c)
		}
		if why != "" {
			log.FromContext(ctx).V(1).Info("a member is left out of the auto split", "cluster", c.Name, "reason", why)
			members = append(members, autosplit.Member{Name: c.Name, Ready: true, LeftOut: why})
			continue
		}
		s, err := r.auto.snapshot(ctx, c.Name, req.Resource)
		if err != nil {
			log.FromContext(ctx).Error(err, "a member whose numbers cannot be read gets no auto split", "cluster", c.Name)
			members = append(members, autosplit.Member{Name: c.Name})
			continue
		}
		snaps[c.Name] = s
		members = append(members, s.member)
	}
	return members, snaps, nil
}

// childKind is the kind of a HyperJob's children, which a member must serve.
var childKind = batchv1alpha1.SchemeGroupVersion.WithKind("Job")

// memberLeftOut says why Karmada's scheduler would place no child in a Ready member, "" when it
// would: the member does not serve the children's kind (its Cluster's status.apiEnablements, read as
// Karmada's APIEnablement filter reads it: a kind not listed while the list is incomplete counts as
// not served), or it has a NoSchedule or NoExecute taint (the children's PropagationPolicies
// tolerate none; Karmada's TaintToleration filter).
func memberLeftOut(c *clusterv1alpha1.Cluster) string {
	switch c.APIEnablement(childKind) {
	case clusterv1alpha1.APIEnabled:
	case clusterv1alpha1.APIDisabled:
		return fmt.Sprintf("serves no %s %s: not in its Cluster's status.apiEnablements, so Karmada places no child there", childKind.GroupVersion(), childKind.Kind)
	default:
		return fmt.Sprintf("has not reported serving %s %s: its Cluster's status.apiEnablements is incomplete, so Karmada places no child there", childKind.GroupVersion(), childKind.Kind)
	}
	for i := range c.Spec.Taints {
		t := &c.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("tainted %s, which the children's PropagationPolicies do not tolerate", t.ToString())
		}
	}
	return ""
}

// clusterReady reports whether Karmada's Ready condition of the Cluster is True and it is not being
// deleted: the auto split places nothing there, and its children are reported lost (memberloss.go).
func clusterReady(c *clusterv1alpha1.Cluster) bool {
	return c.DeletionTimestamp == nil && apimeta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
}

// reservations are the children of other decided HyperJobs (recorded on them, or in the ledger
// until the cache shows them) whose pods the members' numbers do not show yet. Finished
// HyperJobs, HyperJobs being deleted or gone, and finished children reserve nothing.
//
// A ledger entry is only ever made for a HyperJob read from the cache, so a listing of the same
// cache without it means the HyperJob was deleted: the entry is dropped then (the delete event
// drops it too, dropDeleted), never kept for a time.
func (r *Reconciler) reservations(ctx context.Context, self *trainingv1alpha1.HyperJob, res corev1.ResourceName, snaps map[string]*memberSnapshot) ([]autosplit.Reservation, error) {
	var list trainingv1alpha1.HyperJobList
	if err := r.client.List(ctx, &list); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, fmt.Errorf("listing HyperJobs for the auto split's reservations: %w", err)
	}
	d := r.auto
	type decided struct {
		ns       string
		rec      *autoRecord
		finished map[string]bool
	}
	byUID := map[types.UID]decided{}
	seen := map[types.UID]bool{}
	d.ledgerMu.Lock()
	defer d.ledgerMu.Unlock()
	for i := range list.Items {
		hj := &list.Items[i]
		seen[hj.UID] = true
		rec, err := readAutoRecord(hj)
		if err != nil || rec == nil {
			continue // undecided, or unreadable (refused by its own plan)
		}
		delete(d.ledger, hj.UID) // the cache shows it
		if hj.UID == self.UID || hj.DeletionTimestamp != nil || hyperjobstatus.IsFinished(&hj.Status) {
			continue
		}
		fin := map[string]bool{}
		for name, s := range recordedStates(&hj.Status) {
			fin[name] = finished(s.Phase)
		}
		byUID[hj.UID] = decided{ns: hj.Namespace, rec: rec, finished: fin}
	}
	for uid, e := range d.ledger {
		if _, ok := byUID[uid]; ok || uid == self.UID {
			continue
		}
		if !seen[uid] {
			delete(d.ledger, uid) // deleted: its reservation goes with it
			continue
		}
		byUID[uid] = decided{ns: e.ns, rec: e.rec}
	}
	uids := make([]string, 0, len(byUID))
	for uid := range byUID {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	var out []autosplit.Reservation
	for _, uid := range uids {
		e := byUID[types.UID(uid)]
		if e.rec.Resource != res {
			continue
		}
		names := make([]string, 0, len(e.rec.Children))
		for n := range e.rec.Children {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := e.rec.Children[n]
			if e.finished[n] {
				continue
			}
			shown := 0
			if s := snaps[p.Cluster]; s != nil {
				shown = s.shown[types.NamespacedName{Namespace: e.ns, Name: n}]
			}
			if left := p.Pods - shown; left > 0 {
				out = append(out, autosplit.Reservation{Cluster: p.Cluster, Domain: p.Domain, Pods: left, PodDemand: p.PodDemand})
			}
		}
	}
	return out, nil
}

// recordOf assigns the decision's places to the children by name: each group's children in index
// order over its placements (clusters in the decision's order, domains by name).
func recordOf(dec *autosplit.Decision, req *AutoRequest) *autoRecord {
	rec := &autoRecord{Resource: req.Resource, Children: map[string]autoPlace{}}
	for _, g := range req.Groups {
		names := req.Children[g.Name]
		next := 0
		for _, c := range dec.Clusters {
			for _, p := range dec.Placements {
				if p.Cluster != c || p.Group != g.Name {
					continue
				}
				doms := make([]string, 0, len(p.Domains))
				for dom := range p.Domains {
					doms = append(doms, dom)
				}
				sort.Strings(doms)
				for _, dom := range doms {
					for range p.Domains[dom] {
						if next < len(names) {
							rec.Children[names[next]] = autoPlace{Cluster: c, Domain: dom, Pods: g.Pods, PodDemand: g.PodDemand}
							next++
						}
					}
				}
			}
		}
	}
	return rec
}

// waitingHyperJobs maps any event to the HyperJobs waiting for an auto split (their AutoSplit
// condition False): a Cluster whose status changed, or a HyperJob deleted, may make room.
func (r *Reconciler) waitingHyperJobs(ctx context.Context, _ client.Object) []reconcile.Request {
	var list trainingv1alpha1.HyperJobList
	if err := r.client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing HyperJobs waiting for an auto split")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		c := apimeta.FindStatusCondition(list.Items[i].Status.Conditions, ConditionAutoSplit)
		if c != nil && c.Status == metav1.ConditionFalse {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// childFinished passes a Volcano Job that finished or went away: a HyperJob's child whose pods
// no longer hold accelerators in its member (Karmada reflects the member's state into it).
var childFinished = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*batchv1alpha1.Job)
		n, ok2 := e.ObjectNew.(*batchv1alpha1.Job)
		return ok1 && ok2 && !finished(o.Status.State.Phase) && finished(n.Status.State.Phase)
	},
}

// hyperJobGone drops a deleted HyperJob's decision from the ledger (its reservation goes at once)
// and returns the HyperJobs waiting for an auto split: its room may let them fit.
func (r *Reconciler) hyperJobGone(ctx context.Context, obj client.Object) []reconcile.Request {
	r.auto.dropDeleted(obj.GetUID())
	return r.waitingHyperJobs(ctx, obj)
}

// hyperJobDeleted passes only deletions (their reservations and pods go).
var hyperJobDeleted = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// syncAuto handles a plan whose auto split is not decided yet: mode auto needs Karmada's Clusters,
// a decision is made only from a current view of the HyperJob, and a refusal is kept in the plan
// for the status.
func (r *Reconciler) syncAuto(ctx context.Context, hj *trainingv1alpha1.HyperJob, plan *Plan, res *syncResult) error {
	if r.auto == nil {
		plan.Auto = nil
		plan.Refusal = &Refusal{Condition: ConditionSplitPolicyInvalid, Reason: ReasonAutoNeedsKarmada,
			Message: "splitPolicy.mode auto decides over Karmada's member clusters, but this apiserver serves no Karmada Clusters (cluster.karmada.io) and ResourceBindings: run the HyperJob controller against the Karmada control plane, or use mode static"}
		return nil
	}
	if ok, err := r.cacheIsCurrent(ctx, hj); err != nil || !ok {
		res.staleCache = err == nil
		return err
	}
	out, err := r.decideAuto(ctx, hj, plan.Auto)
	if err != nil {
		res.autoRetry = true
		return err
	}
	if out.waiting != "" {
		plan.AutoWaiting = out.waiting
		res.autoRetry = true
	}
	return nil
}
