package gangcontract

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// Taints that keep a gang's pods off nodes, in the words hyperbatch-scheduler's message and
// `kubectl hyperbatch why` and `topology` share: the taint, the nodes carrying it and the
// toleration that would admit the pods.

// UntoleratedTaint is a NoSchedule or NoExecute taint that the gang's pods do not tolerate, or the
// cordon (spec.unschedulable, which the scheduler treats as the taint
// node.kubernetes.io/unschedulable:NoSchedule), with the nodes that carry it.
type UntoleratedTaint struct {
	Key    string             `json:"key"`
	Value  string             `json:"value,omitempty"`
	Effect corev1.TaintEffect `json:"effect"`
	// Cordon: the nodes are cordoned (spec.unschedulable), not tainted by hand.
	Cordon bool `json:"cordon,omitempty"`
	// Nodes carrying it, sorted.
	Nodes []string `json:"nodes"`
}

// String is the taint as kubectl writes it ("key=value:Effect"), or "cordoned (spec.unschedulable)".
func (u UntoleratedTaint) String() string {
	if u.Cordon {
		return "cordoned (spec.unschedulable)"
	}
	if u.Value == "" {
		return u.Key + ":" + string(u.Effect)
	}
	return u.Key + "=" + u.Value + ":" + string(u.Effect)
}

// NodeNotReady says the taint is the node lifecycle controller's for a node that is not Ready
// (node.kubernetes.io/unreachable: its kubelet stopped reporting; node.kubernetes.io/not-ready:
// Ready=False). It is lifted when the node is Ready again; tolerating it would put the gang on a node
// that cannot run it, so no toleration is offered for it.
func (u UntoleratedTaint) NodeNotReady() bool {
	return !u.Cordon && (u.Key == corev1.TaintNodeUnreachable || u.Key == corev1.TaintNodeNotReady)
}

// NodeNames names at most 4 of the nodes carrying the taint, then how many more.
func (u UntoleratedTaint) NodeNames() string {
	if len(u.Nodes) <= 4 {
		return strings.Join(u.Nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(u.Nodes[:4], ", "), len(u.Nodes)-4)
}

// Remedy says what would admit the pods: the toleration to add to the pods' spec.tolerations (in
// YAML flow style); for cordoned nodes, to uncordon them; for a node that is not Ready, that the node
// controller lifts its taint when the node is Ready again.
func (u UntoleratedTaint) Remedy() string {
	switch {
	case u.Cordon:
		return "uncordon the nodes (kubectl uncordon), or add the toleration {key: " + corev1.TaintNodeUnschedulable + ", operator: Exists, effect: NoSchedule}"
	case u.Key == corev1.TaintNodeUnreachable:
		return "the node controller's taint: the node's kubelet stopped reporting (Ready=Unknown); it is lifted when the node is Ready again"
	case u.Key == corev1.TaintNodeNotReady:
		return "the node controller's taint: the node is not Ready (Ready=False); it is lifted when the node is Ready again"
	case u.Value == "":
		return fmt.Sprintf("add the toleration {key: %s, operator: Exists, effect: %s}", u.Key, u.Effect)
	}
	return fmt.Sprintf("add the toleration {key: %s, operator: Equal, value: %s, effect: %s}", u.Key, u.Value, u.Effect)
}

// UntoleratedTaints lists the NoSchedule and NoExecute taints (and the cordon) of nodes that pods
// with these tolerations do not tolerate, each with the nodes carrying it; most nodes first, then
// by name. Every untolerated taint of a node is listed, so adding all the tolerations admits the
// pods. Tolerations match as in the scheduler's TaintToleration plugin (comparisonOperators: its
// TaintTolerationComparisonOperators feature gate).
func UntoleratedTaints(nodes []*corev1.Node, tolerations []corev1.Toleration, comparisonOperators bool) []UntoleratedTaint {
	logger := klog.Background()
	byTaint := map[string]*UntoleratedTaint{}
	add := func(u UntoleratedTaint, node string) {
		k := u.String()
		if byTaint[k] == nil {
			u.Nodes = nil
			byTaint[k] = &u
		}
		byTaint[k].Nodes = append(byTaint[k].Nodes, node)
	}
	cordon := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for _, n := range nodes {
		if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, tolerations, cordon, comparisonOperators) {
			add(UntoleratedTaint{Key: cordon.Key, Effect: cordon.Effect, Cordon: true}, n.Name)
		}
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
				continue
			}
			if n.Spec.Unschedulable && t.Key == cordon.Key && t.Effect == cordon.Effect {
				continue // the cordon's own taint, listed as the cordon
			}
			if !corev1helpers.TolerationsTolerateTaint(logger, tolerations, t, comparisonOperators) {
				add(UntoleratedTaint{Key: t.Key, Value: t.Value, Effect: t.Effect}, n.Name)
			}
		}
	}
	out := make([]UntoleratedTaint, 0, len(byTaint))
	for _, u := range byTaint {
		sort.Strings(u.Nodes)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].Nodes) != len(out[j].Nodes) {
			return len(out[i].Nodes) > len(out[j].Nodes)
		}
		return out[i].String() < out[j].String()
	})
	return out
}

// DescribeUntolerated writes taints as "key=value:NoSchedule on 16 nodes (add the toleration
// {...}); ..." for messages.
func DescribeUntolerated(taints []UntoleratedTaint) string {
	parts := make([]string, len(taints))
	for i, u := range taints {
		parts[i] = fmt.Sprintf("%s on %d node(s) (%s)", u, len(u.Nodes), u.Remedy())
	}
	return strings.Join(parts, "; ")
}
