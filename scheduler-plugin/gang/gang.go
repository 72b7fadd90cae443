// Package gang resolves a pod's gang: the Volcano PodGroup named by the pod's
// scheduling.k8s.io/group-name annotation, with its minMember, minResources and networkTopology.
// Pods without the annotation are not gang pods and the scheduler plugin leaves them alone.
package gang

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// GroupNameAnnotation names a pod's PodGroup (in the pod's namespace).
const GroupNameAnnotation = schedulingv1beta1.KubeGroupNameAnnotationKey // "scheduling.k8s.io/group-name"

// Key identifies a gang: the PodGroup's namespace and name.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// KeyOf returns the pod's gang, if it has one. A pod of an upstream Workload API pod group
// (spec.schedulingGroup, see UpstreamGroupOf) belongs to no Volcano gang even when it also carries the
// annotation: the scheduler refuses it, so it must not count toward a Volcano gang's minMember.
func KeyOf(pod *corev1.Pod) (Key, bool) {
	name := pod.Annotations[GroupNameAnnotation]
	if name == "" || pod.Spec.SchedulingGroup != nil {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
}

// UpstreamGroupOf returns the upstream Workload API (scheduling.k8s.io, KEP-4671) pod group the pod
// names in spec.schedulingGroup (Kubernetes 1.36+, feature gate GenericWorkload), if any. Such a
// group's gang policy and topology constraints live in scheduling.k8s.io PodGroup/Workload objects,
// which HyperTopology does not read.
func UpstreamGroupOf(pod *corev1.Pod) (string, bool) {
	g := pod.Spec.SchedulingGroup
	if g == nil {
		return "", false
	}
	if g.PodGroupName != nil {
		return *g.PodGroupName, true
	}
	return "", true // a group form newer than this build knows
}

// Mode is the network topology mode.
type Mode string

// Network topology modes, as in Volcano.
const (
	// Hard keeps the gang inside one HyperNode no higher than the allowed tier.
	Hard Mode = Mode(schedulingv1beta1.HardNetworkTopologyMode)
	// Soft prefers the lowest tier that fits and falls back upward.
	Soft Mode = Mode(schedulingv1beta1.SoftNetworkTopologyMode)
)

// Topology is a gang's network topology constraint.
type Topology struct {
	Mode Mode
	// HighestTier is highestTierAllowed; nil when not set.
	HighestTier *int
	// HighestTierName is highestTierName; "" when not set.
	HighestTierName string
}

// Spec is what the scheduler needs from a PodGroup.
type Spec struct {
	Key Key
	UID types.UID
	// Placement identifies the PodGroup fields a placement depends on (PlacementKey).
	Placement    uint64
	CreationTime time.Time
	// MinMember is at least 1.
	MinMember    int32
	MinResources corev1.ResourceList
	// Topology is nil when the gang has no network topology constraint.
	Topology *Topology
	// SubGroups is spec.subGroupPolicy, parsed (subgroups.go); SubGroupErr says why it cannot be
	// honoured (the gang then waits with that message).
	SubGroups   []SubGroupPolicy
	SubGroupErr error
	// TaskMins is minTaskMember as Volcano applies it (TaskMins); nil for none.
	TaskMins map[string]int32
}

// SpecOf builds the gang's Spec from its PodGroup. When the PodGroup has no networkTopology, the
// pod-level hints volcano.sh/network-topology-mode and volcano.sh/network-topology-highest-tier (as
// Volcano's job controller reads them) apply.
func SpecOf(pg *schedulingv1beta1.PodGroup, pod *corev1.Pod) Spec {
	s := Spec{
		Key:          Key{Namespace: pg.Namespace, Name: pg.Name},
		UID:          pg.UID,
		Placement:    PlacementKey(pg),
		CreationTime: pg.CreationTimestamp.Time,
		MinMember:    max(pg.Spec.MinMember, 1),
	}
	if pg.Spec.MinResources != nil {
		s.MinResources = nodeResources(*pg.Spec.MinResources)
	}
	s.SubGroups, s.SubGroupErr = parseSubGroups(pg)
	s.TaskMins = TaskMins(pg)
	if nt := pg.Spec.NetworkTopology; nt != nil {
		t := &Topology{Mode: Mode(nt.Mode), HighestTierName: nt.HighestTierName}
		if nt.HighestTierAllowed != nil {
			v := *nt.HighestTierAllowed
			t.HighestTier = &v
		}
		if t.Mode == "" {
			t.Mode = Hard // the CRD's default
		}
		s.Topology = t
	} else if pod != nil {
		if mode := pod.Annotations[topologyv1alpha1.NetworkTopologyModeAnnotationKey]; mode != "" {
			t := &Topology{Mode: Mode(mode)}
			if v, err := strconv.Atoi(pod.Annotations[topologyv1alpha1.NetworkTopologyHighestTierAnnotationKey]); err == nil {
				t.HighestTier = &v
			}
			s.Topology = t
		}
	}
	return s
}

// PlacementKey is a hash of the PodGroup fields a gang's placement depends on: minMember,
// minResources, networkTopology, subGroupPolicy, minTaskMember and queue. A cached placement is valid while it is unchanged.
// metadata.generation would not do: Volcano's PodGroup CRD has no status subresource, so every
// status write (phase, counts, conditions) bumps the generation without changing the placement.
func PlacementKey(pg *schedulingv1beta1.PodGroup) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "minMember=%d;queue=%s;", pg.Spec.MinMember, pg.Spec.Queue)
	if pg.Spec.MinResources != nil {
		names := make([]string, 0, len(*pg.Spec.MinResources))
		for n := range *pg.Spec.MinResources {
			names = append(names, string(n))
		}
		sort.Strings(names)
		for _, n := range names {
			q := (*pg.Spec.MinResources)[corev1.ResourceName(n)]
			_, _ = fmt.Fprintf(h, "min:%s=%s;", n, q.String())
		}
	}
	if nt := pg.Spec.NetworkTopology; nt != nil {
		_, _ = fmt.Fprintf(h, "nt:mode=%s;name=%s;", nt.Mode, nt.HighestTierName)
		if nt.HighestTierAllowed != nil {
			_, _ = fmt.Fprintf(h, "tier=%d;", *nt.HighestTierAllowed)
		}
	}
	if len(pg.Spec.SubGroupPolicy) > 0 {
		b, _ := json.Marshal(pg.Spec.SubGroupPolicy) // plain API structs: cannot fail
		_, _ = fmt.Fprintf(h, "sub:%s;", b)
	}
	if len(pg.Spec.MinTaskMember) > 0 {
		b, _ := json.Marshal(pg.Spec.MinTaskMember) // map keys are sorted by encoding/json
		_, _ = fmt.Fprintf(h, "task:%s;", b)
	}
	return h.Sum64()
}

// Limit is a resolved topology constraint.
type Limit struct {
	// Hard: the gang must stay inside one HyperNode allowed by the limit (see below). Otherwise it
	// prefers the lowest tier that fits and may fall back up to the cluster root.
	Hard bool
	// Tier is highestTierAllowed: HyperNodes of tier <= Tier (the cluster root too, when its tier is).
	// Used when TierName is "" and AnyHyperNode is false.
	Tier int
	// TierName is highestTierName, resolved per tree: a HyperNode whose tierName is TierName, or one
	// below such a HyperNode. A tree (or a branch) without that name is never used, and the cluster
	// root never is.
	TierName string
	// AnyHyperNode is `mode: hard` without a tier bound: any single real HyperNode, never the cluster
	// root (nodes in no HyperNode, or several trees, are not one network domain).
	AnyHyperNode bool
	// Describe explains the limit in messages, e.g. "highestTierAllowed=1".
	Describe string
}

// Resolve turns the constraint into a limit. hasTierName reports whether some HyperNode declares a
// tierName; an unknown highestTierName on a hard constraint is an error (the gang waits) rather than
// a silent relaxation: a typo must not spread a gang over the cluster. A hard constraint without any
// tier bound keeps the gang inside one HyperNode (any tier) instead of Volcano's "no constraint": the
// user asked for hard, and no CRD default gives it a tier any more.
func (t *Topology) Resolve(hasTierName func(string) bool) (Limit, error) {
	switch t.Mode {
	case Hard, Soft:
	default:
		return Limit{}, fmt.Errorf("unknown network topology mode %q (want hard or soft)", t.Mode)
	}
	if t.Mode == Soft {
		return Limit{Describe: "soft"}, nil
	}
	if t.HighestTier != nil {
		return Limit{Hard: true, Tier: *t.HighestTier, Describe: fmt.Sprintf("highestTierAllowed=%d", *t.HighestTier)}, nil
	}
	if t.HighestTierName != "" {
		if !hasTierName(t.HighestTierName) {
			return Limit{}, fmt.Errorf("highestTierName %q matches no HyperNode tierName (a typo? set spec.networkTopology.highestTierName to the tierName of an existing HyperNode)", t.HighestTierName)
		}
		return Limit{Hard: true, TierName: t.HighestTierName, Describe: fmt.Sprintf("highestTierName=%s", t.HighestTierName)}, nil
	}
	return Limit{Hard: true, AnyHyperNode: true, Describe: "hard without a tier bound: one HyperNode of any tier"}, nil
}

// nodeResources keeps the minResources entries that name node resources. Volcano's job controller
// fills a PodGroup's minResources with ResourceQuota-style usage (quota's PodUsageFunc over the
// minAvailable pods): besides cpu, memory and extended resources it adds requests.*, limits.*,
// count/* and pods, which no node offers in that form; as a placement floor they would make every
// domain too small. "requests.<name>" counts as <name> when <name> itself is absent; limits.*,
// count/* and pods are dropped (the pod count is minMember's business). Nil when nothing is left.
func nodeResources(in corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range in {
		name := string(n)
		switch {
		case n == corev1.ResourcePods, strings.HasPrefix(name, "count/"), strings.HasPrefix(name, "limits."):
		case strings.HasPrefix(name, "requests."):
			plain := corev1.ResourceName(strings.TrimPrefix(name, "requests."))
			if _, ok := in[plain]; !ok {
				out[plain] = q.DeepCopy()
			}
		default:
			out[n] = q.DeepCopy()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
