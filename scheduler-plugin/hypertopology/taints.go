package hypertopology

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// noUsableNode is the waiting message for a gang none of whose pods' nodes are usable at all: every
// node is excluded by a taint the pod does not tolerate, a cordon, its nodeSelector or its
// required node affinity (eligibleFor). The domain chooser would otherwise say that the pod asks
// for more than any usable node has, which reads as "the pod is too big". The message names the
// taints and the toleration that admits the pods (gangcontract.UntoleratedTaints, the words
// `kubectl hyperbatch why` uses). "" when some node is usable.
func noUsableNode(pod *corev1.Pod, nodes []fwk.NodeInfo) string {
	eligible := eligibleFor(pod)
	var all []*corev1.Node
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		if eligible(n) {
			return ""
		}
		all = append(all, n)
	}
	if len(all) == 0 {
		return ""
	}
	taints := gangcontract.UntoleratedTaints(all, pod.Spec.Tolerations,
		utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators))
	excluded := map[string]bool{}
	for _, u := range taints {
		for _, n := range u.Nodes {
			excluded[n] = true
		}
	}
	msg := "no node may run the gang's pods: "
	if len(taints) > 0 {
		msg += fmt.Sprintf("%d of the %d nodes have taints the pods do not tolerate: %s", len(excluded), len(all), gangcontract.DescribeUntolerated(taints))
	}
	if rest := len(all) - len(excluded); rest > 0 {
		if len(taints) > 0 {
			msg += "; "
		}
		msg += fmt.Sprintf("%d node(s) do not match the pods' nodeSelector or required node affinity", rest)
	}
	return msg
}

// excludedByTaint is the note added to the waiting message of a gang that some nodes could run but
// that does not fit: the nodes its pods would otherwise use (their nodeSelector and required node
// affinity admit them) that a taint the pods do not tolerate, or a cordon, keeps the gang off. A
// node whose kubelet stopped carries the node controller's node.kubernetes.io/unreachable taint;
// without this note the gang's message only said that no HyperNode had room, as if the node were
// full. "" when no such node exists.
func excludedByTaint(pod *corev1.Pod, nodes []fwk.NodeInfo) string {
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	var admitted []*corev1.Node
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		if ok, _ := aff.Match(n); ok {
			admitted = append(admitted, n)
		}
	}
	taints := gangcontract.UntoleratedTaints(admitted, pod.Spec.Tolerations,
		utilfeature.DefaultFeatureGate.Enabled(features.TaintTolerationComparisonOperators))
	if len(taints) == 0 {
		return ""
	}
	excluded := map[string]bool{}
	parts := make([]string, len(taints))
	for i, u := range taints {
		for _, n := range u.Nodes {
			excluded[n] = true
		}
		parts[i] = fmt.Sprintf("%s on %s (%s)", u, u.NodeNames(), u.Remedy())
	}
	verb := "are"
	if len(excluded) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%d of the %d nodes the pods may otherwise use %s excluded by taints the pods do not tolerate: %s",
		len(excluded), len(admitted), verb, strings.Join(parts, "; "))
}
