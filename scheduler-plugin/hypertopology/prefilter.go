package hypertopology

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

const stateKey fwk.StateKey = "hyperbatch.dev/" + Name

// state is what PreFilter learned about the pod's gang, for the later extension points.
type state struct {
	key  gang.Key
	spec *gang.Spec // nil when the PodGroup does not exist
	plan *plan      // nil when the gang is not pinned (no topology constraint, or no plan yet)
	// pins narrows the plan's nodes for a pod of a gang with sub-groups: where its sub-group's
	// quota is left (nil otherwise).
	pins sets.Set[string]
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
		if p.res.anyHold() {
			return nil, nil // Filter keeps the pod off nodes held for a preempting gang
		}
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
	if spec.Topology == nil && len(spec.SubGroups) == 0 && spec.SubGroupErr == nil {
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
	if _, ok := pg.Annotations[gangcontract.PlacementAnnotation]; ok {
		p.placements.clear(key) // placed now: why it waited no longer holds
	}
	if pl.groups != nil {
		pins, why := groupPins(pl, &spec, pod, members, p.res.Placed(key, members))
		if pins == nil {
			if len(p.res.Assumed(key)) == 0 {
				// Nothing of the gang is in flight: the next attempt chooses again, around the pods
				// placed since, so a sub-group left out of the plan gets its room once there is some.
				p.dropPlan(key)
			}
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
		}
		st.pins = pins
		return &fwk.PreFilterResult{NodeNames: pins}, nil
	}
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
	if bound == 0 || int32(bound) >= spec.MinMember || len(p.res.Assumed(spec.Key)) > 0 {
		return
	}
	msg := fmt.Sprintf("gang %s has %d of its minMember %d pods bound and none reserved (a binding failed or the scheduler restarted); completing it: the other %d pod(s) are placed next to the bound ones",
		spec.Key, bound, spec.MinMember, int(spec.MinMember)-bound)
	klog.FromContext(ctx).V(2).Info("Completing a partly bound gang", "gang", spec.Key, "bound", bound, "minMember", spec.MinMember, "pod", klog.KObj(pod))
	p.events.gang(spec, pod, corev1.EventTypeWarning, ReasonGangPartlyBound, msg)
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
