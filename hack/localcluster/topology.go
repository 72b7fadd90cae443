package main

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// The fake datacenter: every leaf switch connects nodesPerLeaf nodes, every spine leavesPerSpine leaf
// switches, and one top switch joins all spines. Tiers follow Volcano: a lower tier is a tighter domain.
const (
	nodesPerLeaf   = 4
	leavesPerSpine = 2

	tierLeaf  = 1
	tierSpine = 2
	tierTop   = 3

	// kwok manages exactly the nodes carrying this annotation (--manage-nodes-with-annotation-selector).
	kwokNodeAnnotation = localproc.KwokNodeAnnotation
	kwokNodeValue      = localproc.KwokNodeValue
	// Every fake node carries type=kwok so workloads can select them with a nodeSelector.
	kwokNodeLabel      = "type"
	kwokNodeLabelValue = "kwok"

	labelLeaf  = "topology.hyperbatch.dev/leaf"
	labelSpine = "topology.hyperbatch.dev/spine"
	labelTop   = "topology.hyperbatch.dev/top"

	gpuResource corev1.ResourceName = "nvidia.com/gpu"

	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "hyperbatch-localcluster"
)

// fakeNode is one kwok node and the switches above it.
type fakeNode struct {
	Name, Leaf, Spine, Top string
}

// switchGroup is one HyperNode: its tier and its members (node names for tier 1, HyperNode names above).
type switchGroup struct {
	Name     string
	Tier     int
	TierName string
	Type     topologyv1alpha1.MemberType
	Members  []string
}

// topology is the whole generated datacenter.
type topology struct {
	Nodes  []fakeNode
	Leaves []switchGroup
	Spines []switchGroup
	Top    switchGroup
}

// buildTopology lays out n nodes: 4 per leaf, 2 leaves per spine, one top over all spines. The last leaf
// or spine may be partly filled. Names are zero-padded so that kubectl lists them in order.
func buildTopology(n int) (topology, error) {
	if n < 1 {
		return topology{}, fmt.Errorf("--nodes must be at least 1 (got %d)", n)
	}
	nLeaves := ceilDiv(n, nodesPerLeaf)
	nSpines := ceilDiv(nLeaves, leavesPerSpine)
	nodeName := namer("kwok-node", n)
	leafName := namer("leaf", nLeaves)
	spineName := namer("spine", nSpines)
	const topName = "top"

	t := topology{
		Nodes:  make([]fakeNode, 0, n),
		Leaves: make([]switchGroup, nLeaves),
		Spines: make([]switchGroup, nSpines),
		Top:    switchGroup{Name: topName, Tier: tierTop, TierName: "top", Type: topologyv1alpha1.MemberTypeHyperNode},
	}
	for s := range t.Spines {
		t.Spines[s] = switchGroup{Name: spineName(s), Tier: tierSpine, TierName: "spine", Type: topologyv1alpha1.MemberTypeHyperNode}
		t.Top.Members = append(t.Top.Members, t.Spines[s].Name)
	}
	for l := range t.Leaves {
		t.Leaves[l] = switchGroup{Name: leafName(l), Tier: tierLeaf, TierName: "leaf", Type: topologyv1alpha1.MemberTypeNode}
		spine := &t.Spines[l/leavesPerSpine]
		spine.Members = append(spine.Members, t.Leaves[l].Name)
	}
	for i := 0; i < n; i++ {
		leaf := &t.Leaves[i/nodesPerLeaf]
		node := fakeNode{Name: nodeName(i), Leaf: leaf.Name, Spine: t.Spines[i/nodesPerLeaf/leavesPerSpine].Name, Top: topName}
		leaf.Members = append(leaf.Members, node.Name)
		t.Nodes = append(t.Nodes, node)
	}
	return t, nil
}

// groups returns every HyperNode, lowest tier first.
func (t topology) groups() []switchGroup {
	out := make([]switchGroup, 0, len(t.Leaves)+len(t.Spines)+1)
	out = append(out, t.Leaves...)
	out = append(out, t.Spines...)
	return append(out, t.Top)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// namer returns a function producing prefix-<i>, zero-padded to the width of count-1.
func namer(prefix string, count int) func(int) string {
	width := len(strconv.Itoa(max(count-1, 0)))
	return func(i int) string { return fmt.Sprintf("%s-%0*d", prefix, width, i) }
}

// nodeObject builds the kwok Node: the annotation kwok selects on, topology labels, and a GPU-node
// capacity. Status is accepted on create (as from a kubelet); kwok then marks the node Ready. No taint:
// every node of this cluster is fake, so workloads need only the type=kwok nodeSelector (or nothing).
func nodeObject(n fakeNode) *corev1.Node {
	return localproc.MemberNodeObject(localproc.MemberNode{Name: n.Name, GPUs: 8, Labels: map[string]string{
		corev1.LabelInstanceTypeStable: "kwok-gpu-8x",
		labelLeaf:                      n.Leaf,
		labelSpine:                     n.Spine,
		labelTop:                       n.Top,
		"nvidia.com/gpu.present":       "true",
	}})
}

// hyperNodeObject builds the Volcano HyperNode for one switch; every member is an exact name match.
func hyperNodeObject(g switchGroup) *topologyv1alpha1.HyperNode {
	hn := &topologyv1alpha1.HyperNode{
		ObjectMeta: metav1.ObjectMeta{
			Name:   g.Name,
			Labels: map[string]string{managedByLabel: managedByValue},
		},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: g.Tier, TierName: g.TierName},
	}
	for _, m := range g.Members {
		hn.Spec.Members = append(hn.Spec.Members, topologyv1alpha1.MemberSpec{
			Type:     g.Type,
			Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: m}},
		})
	}
	return hn
}
