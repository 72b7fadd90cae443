package hypertopology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

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

// releaseYounger rejects the waiting pods of gangs queued after spec's gang when giving their
// reservations back lets spec's gang fit.
func (p *Plugin) releaseYounger(ctx context.Context, pod *corev1.Pod, spec *gang.Spec) (string, bool) {
	me := gangcontract.Order{Priority: corev1helpers.PodPriority(pod), Created: spec.CreationTime, Namespace: spec.Key.Namespace, Name: spec.Key.Name}
	freed := map[string]domain.Freed{}
	younger := map[gang.Key][]fwk.WaitingPod{}
	for k, wps := range p.waitingByGang() {
		if k == spec.Key || len(wps) == 0 {
			continue
		}
		o := gangcontract.Order{Priority: corev1helpers.PodPriority(wps[0].GetPod()), Namespace: k.Namespace, Name: k.Name}
		if pg, err := p.pgLister.PodGroups(k.Namespace).Get(k.Name); err == nil {
			o.Created = pg.CreationTimestamp.Time
		}
		if !me.Before(o) {
			continue
		}
		assumed := p.res.Assumed(k)
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
		assumed := p.res.Assumed(k)
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
		unlock := p.res.lockGang(k)
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
