package defaults

import (
	"fmt"
	"strconv"
	"strings"

	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// SubGroupKeys are the annotations that ask for sub-groups (docs/scheduler.md, "Ways in").
var SubGroupKeys = []string{hbv1.SubGroupByAnnotation, hbv1.SubGroupPodsAnnotation,
	hbv1.SubGroupNetworkTopologyModeAnnotation, hbv1.SubGroupHighestTierAnnotation}

// SubGroupAsk is what the hyperbatch.dev/subgroup-* annotations of a JobSet or a TrainJob ask for,
// before the workload's shape is known: how to split (By), the pods of each sub-group with "pods"
// (Pods), and each sub-group's networkTopology (nil: none).
type SubGroupAsk struct {
	By              string
	Pods            int64
	NetworkTopology *schedulingv1beta1.NetworkTopologySpec
}

// AsksForSubGroups reports whether any sub-group annotation is set.
func AsksForSubGroups(ann map[string]string) bool {
	for _, k := range SubGroupKeys {
		if _, ok := ann[k]; ok {
			return true
		}
	}
	return false
}

// ParseSubGroupAsk reads the sub-group annotations: nil when none is set. A bad value is an error
// naming the annotation and the fix; the JobSet gang controller (which then knows the shape) and the
// TrainJob webhook (which refuses it at once) share it.
func ParseSubGroupAsk(ann map[string]string) (*SubGroupAsk, error) {
	by, ok := ann[hbv1.SubGroupByAnnotation]
	if !ok {
		for _, k := range SubGroupKeys[1:] {
			if _, set := ann[k]; set {
				return nil, fmt.Errorf("annotation %s is set without %s: add %s=%s or %s, or remove it", k, hbv1.SubGroupByAnnotation,
					hbv1.SubGroupByAnnotation, hbv1.SubGroupByReplica, hbv1.SubGroupByPods)
			}
		}
		return nil, nil
	}
	nt, err := subGroupTopology(ann)
	if err != nil {
		return nil, err
	}
	ask := &SubGroupAsk{By: by, NetworkTopology: nt}
	switch by {
	case hbv1.SubGroupByReplica:
		if v, set := ann[hbv1.SubGroupPodsAnnotation]; set {
			return nil, fmt.Errorf("annotation %s=%q is for %s=%s: remove it, or set %s=%s", hbv1.SubGroupPodsAnnotation, v,
				hbv1.SubGroupByAnnotation, hbv1.SubGroupByPods, hbv1.SubGroupByAnnotation, hbv1.SubGroupByPods)
		}
	case hbv1.SubGroupByPods:
		v := ann[hbv1.SubGroupPodsAnnotation]
		ask.Pods, err = strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || ask.Pods < 1 {
			return nil, fmt.Errorf("annotation %s=%q is not a positive integer: with %s=%s set it to the pods of each sub-group", hbv1.SubGroupPodsAnnotation, v,
				hbv1.SubGroupByAnnotation, hbv1.SubGroupByPods)
		}
	default:
		return nil, fmt.Errorf("annotation %s=%q is not %q or %q: set one of them, or remove it", hbv1.SubGroupByAnnotation, by,
			hbv1.SubGroupByReplica, hbv1.SubGroupByPods)
	}
	return ask, nil
}

// subGroupTopology is each sub-group's networkTopology from the annotations (nil: none).
func subGroupTopology(ann map[string]string) (*schedulingv1beta1.NetworkTopologySpec, error) {
	mode, tier := ann[hbv1.SubGroupNetworkTopologyModeAnnotation], ann[hbv1.SubGroupHighestTierAnnotation]
	if mode == "" && tier == "" {
		return nil, nil
	}
	if mode == "" {
		mode = string(schedulingv1beta1.HardNetworkTopologyMode)
	}
	nt := &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.NetworkTopologyMode(mode)}
	if nt.Mode != schedulingv1beta1.HardNetworkTopologyMode && nt.Mode != schedulingv1beta1.SoftNetworkTopologyMode {
		return nil, fmt.Errorf("annotation %s=%q is not %q or %q: set one of them, or remove it", hbv1.SubGroupNetworkTopologyModeAnnotation, mode,
			schedulingv1beta1.HardNetworkTopologyMode, schedulingv1beta1.SoftNetworkTopologyMode)
	}
	if tier != "" {
		t, err := strconv.Atoi(strings.TrimSpace(tier))
		if err != nil || t < 1 {
			return nil, fmt.Errorf("annotation %s=%q is not a positive integer: set the highest HyperNode tier each sub-group may span, or remove it", hbv1.SubGroupHighestTierAnnotation, tier)
		}
		nt.HighestTierAllowed = &t
	}
	return nt, nil
}

// TrainJobSubGroupAnnotations are the sub-group annotations that hold for the JobSet of a TrainJob
// whose annotations are tj: the TrainJob's, when it sets any (a TrainJob's own metadata does not
// reach its JobSet; Trainer copies only the runtime's and runtimePatches' template metadata), else
// the JobSet's own js (from the runtime's template). The two sets are not mixed.
func TrainJobSubGroupAnnotations(tj, js map[string]string) map[string]string {
	src := js
	if AsksForSubGroups(tj) {
		src = tj
	}
	out := map[string]string{}
	for _, k := range SubGroupKeys {
		if v, ok := src[k]; ok {
			out[k] = v
		}
	}
	return out
}
