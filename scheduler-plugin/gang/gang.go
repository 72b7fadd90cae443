// Package gang resolves a pod's gang: the Volcano PodGroup named by the pod's
// scheduling.k8s.io/group-name annotation, with its minMember, minResources and networkTopology.
// Pods without the annotation are not gang pods and the scheduler plugin leaves them alone.
package gang

import (
	"fmt"
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

// KeyOf returns the pod's gang, if it has one.
func KeyOf(pod *corev1.Pod) (Key, bool) {
	name := pod.Annotations[GroupNameAnnotation]
	if name == "" {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
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
	Key          Key
	UID          types.UID
	Generation   int64
	CreationTime time.Time
	// MinMember is at least 1.
	MinMember    int32
	MinResources corev1.ResourceList
	// Topology is nil when the gang has no network topology constraint.
	Topology *Topology
}

// SpecOf builds the gang's Spec from its PodGroup. When the PodGroup has no networkTopology, the
// pod-level hints volcano.sh/network-topology-mode and volcano.sh/network-topology-highest-tier (as
// Volcano's job controller reads them) apply.
func SpecOf(pg *schedulingv1beta1.PodGroup, pod *corev1.Pod) Spec {
	s := Spec{
		Key:          Key{Namespace: pg.Namespace, Name: pg.Name},
		UID:          pg.UID,
		Generation:   pg.Generation,
		CreationTime: pg.CreationTimestamp.Time,
		MinMember:    max(pg.Spec.MinMember, 1),
	}
	if pg.Spec.MinResources != nil {
		s.MinResources = nodeResources(*pg.Spec.MinResources)
	}
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

// Limit is a resolved topology constraint.
type Limit struct {
	// Hard: the gang must stay inside one HyperNode of tier <= Tier. Otherwise it prefers the
	// lowest tier that fits and may fall back up to the cluster root.
	Hard bool
	Tier int
	// Describe explains the limit in messages, e.g. "highestTierAllowed=1".
	Describe string
}

// Resolve turns the constraint into a tier limit. tierOfName resolves highestTierName. Following
// Volcano, a hard constraint without any tier bound behaves like soft; an unknown highestTierName
// on a hard constraint is an error (the gang waits) rather than a silent relaxation.
func (t *Topology) Resolve(tierOfName func(string) (int, bool)) (Limit, error) {
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
		tier, ok := tierOfName(t.HighestTierName)
		if !ok {
			return Limit{}, fmt.Errorf("highestTierName %q matches no HyperNode tierName", t.HighestTierName)
		}
		return Limit{Hard: true, Tier: tier, Describe: fmt.Sprintf("highestTierName=%s (tier %d)", t.HighestTierName, tier)}, nil
	}
	return Limit{Describe: "hard without a tier bound (behaves as soft)"}, nil
}

// nodeResources keeps the names of minResources that nodes can offer. Volcano's job controller writes
// a PodGroup's minResources in ResourceQuota form too ("requests.cpu", "count/pods" next to "cpu" and
// "pods"); no node allocates those, so as demands they would make every domain look full.
// "requests.<name>" counts as <name> when <name> itself is absent; "limits.*" and "count/*" are dropped,
// and so is "pods": the number of pods is minMember, and the domain search counts pod slots itself.
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
	return out
}
