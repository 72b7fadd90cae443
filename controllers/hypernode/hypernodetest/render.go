// Package hypernodetest holds test helpers of the discovery packages: a stable text rendering of a
// HyperNode tree for golden files, and Node builders.
package hypernodetest

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// Render prints one line per HyperNode, highest tier first, then by name:
// "<tier> <tierName> <name>: <member> <member> ...".
func Render(hns []*topologyv1alpha1.HyperNode) string {
	sorted := append([]*topologyv1alpha1.HyperNode(nil), hns...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Spec.Tier != sorted[j].Spec.Tier {
			return sorted[i].Spec.Tier > sorted[j].Spec.Tier
		}
		return sorted[i].Name < sorted[j].Name
	})
	var b strings.Builder
	for _, hn := range sorted {
		members := make([]string, 0, len(hn.Spec.Members))
		for _, m := range hn.Spec.Members {
			if m.Selector.ExactMatch != nil {
				members = append(members, m.Selector.ExactMatch.Name)
			}
		}
		sort.Strings(members)
		fmt.Fprintf(&b, "%d %s %s: %s\n", hn.Spec.Tier, hn.Spec.TierName, hn.Name, strings.Join(members, " "))
	}
	return b.String()
}

// Nodes returns Nodes named names, each with labels.
func Nodes(labels map[string]string, names ...string) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(names))
	for _, n := range names {
		l := map[string]string{corev1.LabelHostname: n}
		for k, v := range labels {
			l[k] = v
		}
		out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: l}})
	}
	return out
}

// FabricTestdata is the directory of the golden fabrics, relative to a provider package.
const FabricTestdata = "../../fabric/testdata"

// GoldenFabrics are the golden fabrics: ibnetdiscover/<name>.txt, ufm/<name>/{systems,links}.json and
// the expected tree, expected/<name>.txt.
var GoldenFabrics = []string{"two-tier", "three-tier", "rail-optimised"}

// GoldenNodes are the Nodes of the golden fabrics' hosts.
func GoldenNodes() []*corev1.Node {
	var names []string
	for i := 0; i < 8; i++ {
		names = append(names, fmt.Sprintf("node%02d", i), fmt.Sprintf("gpu%02d", i))
	}
	return Nodes(nil, names...)
}
