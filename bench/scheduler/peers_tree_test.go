package scheduler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// peerTree is a full HyperNode tree of the peers benchmark: every node sits in exactly one HyperNode
// of each tier 1..tiers; fan[t] is how many tier t-1 members (nodes for t=1) a tier-t HyperNode has,
// so node i belongs to group i/span(t) of tier t.
type peerTree struct {
	label      string // size label in results and file names
	nodes      int
	fan        []int // index 1..tiers
	nodeName   func(i int) string
	hyperName  func(tier, g int) string
	rowTier    int // the SVG draws one row per HyperNode of this tier
	gapTier    int // and a gap between HyperNodes of this tier
	peerSlots  int // 1-CPU pods per node
	tierLabels []string
}

func (t peerTree) tiers() int { return len(t.fan) - 1 }

// span is the number of nodes of one tier-t HyperNode.
func (t peerTree) span(tier int) int {
	s := 1
	for k := 1; k <= tier; k++ {
		s *= t.fan[k]
	}
	return s
}

func (t peerTree) groups(tier int) int { return t.nodes / t.span(tier) }

func (t peerTree) hyperNodes() int {
	n := 0
	for k := 1; k <= t.tiers(); k++ {
		n += t.groups(k)
	}
	return n
}

// index is the node number of a node name, -1 for a node of no tier.
func (t peerTree) index(name string) int {
	var i int
	if _, err := fmt.Sscanf(name[strings.LastIndexByte(name, '-')+1:], "%d", &i); err != nil || i < 0 || i >= t.nodes || t.nodeName(i) != name {
		return -1
	}
	return i
}

// lowestTier is the tier of the lowest HyperNode holding all the given nodes; tiers()+1 is the
// cluster root.
func (t peerTree) lowestTier(nodes []int) int {
	if len(nodes) == 0 {
		return t.tiers() + 1
	}
	for tier := 1; tier <= t.tiers(); tier++ {
		g, same := nodes[0]/t.span(tier), true
		for _, n := range nodes {
			if n < 0 || n/t.span(tier) != g {
				same = false
				break
			}
		}
		if same {
			return tier
		}
	}
	return t.tiers() + 1
}

// emptyTier is the lowest tier whose HyperNodes hold size pods on empty nodes.
func (t peerTree) emptyTier(size int) int {
	for tier := 1; tier <= t.tiers(); tier++ {
		if t.span(tier)*t.peerSlots >= size {
			return tier
		}
	}
	return t.tiers() + 1
}

// threeTier is the 3-tier tree of the throughput benchmark: racks of 10 nodes, spines of 10 racks,
// one zone.
func threeTier(nodes int) peerTree {
	names := []string{"", "rack", "spine", "zone"}
	return peerTree{label: fmt.Sprint(nodes), nodes: nodes, fan: []int{0, tpRack, tpSpine, nodes / (tpRack * tpSpine)},
		nodeName:  func(i int) string { return fmt.Sprintf("tp-node-%05d", i) },
		hyperName: func(tier, g int) string { return fmt.Sprintf("tp-%s-%d", names[tier], g) },
		rowTier:   2, gapTier: 1, peerSlots: tpNodeCPU, tierLabels: names}
}

// domainTree is the tree of BenchmarkDomainChoice (same names): 6,000 nodes under 9,600 HyperNodes,
// tier 1 one node, tier 2 two tier-1, tier 3 six tier-2 (12 nodes), tier 4 five tier-3 (60 nodes),
// no single top HyperNode (the virtual root is tier 5).
func domainTree() peerTree {
	return peerTree{label: "6000-domain", nodes: numNodes, fan: []int{0, 1, perTier2, perTier3, perTier4},
		nodeName:  nodeName,
		hyperName: func(tier, g int) string { return fmt.Sprintf("t%d-%d", tier, g) },
		rowTier:   4, gapTier: 3, peerSlots: tpNodeCPU, tierLabels: []string{"", "t1", "t2", "t3", "t4"}}
}

// peerTrees are the sizes: HB_PEERS_SIZES (comma-separated node counts, multiples of 100, and
// "domain") or 1000, 5000 and the domain tree.
func peerTrees() []peerTree {
	v := os.Getenv("HB_PEERS_SIZES")
	if v == "" {
		v = "1000,5000,domain"
	}
	var out []peerTree
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		var n int
		switch _, err := fmt.Sscanf(f, "%d", &n); {
		case f == "domain":
			out = append(out, domainTree())
		case err == nil && n >= tpRack*tpSpine && n%(tpRack*tpSpine) == 0:
			out = append(out, threeTier(n))
		}
	}
	return out
}

// sizeArg is the HB_PEERS_SIZES value that runs this tree.
func (t peerTree) sizeArg() string {
	if t.label == domainTree().label {
		return "domain"
	}
	return fmt.Sprint(t.nodes)
}

// create makes the nodes (8 CPU, 110 pods, Ready, untainted, labelled with their domain of each tier:
// nodeLabels) and the HyperNodes (exact members).
func (t peerTree) create(b *testing.B, cs kubernetes.Interface, env *framework.Env) {
	ctx := context.Background()
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(t.peerSlots), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: *resource.NewQuantity(tpNodePods, resource.DecimalSI)}
	framework.Parallel(b, tpSetupPar, t.nodes, func(i int) error {
		return createReadyNode(ctx, cs, t.nodeName(i), t.nodeLabels(i), res, nil)
	})
	for tier := 1; tier <= t.tiers(); tier++ {
		framework.Parallel(b, tpSetupPar, t.groups(tier), func(g int) error {
			var ms []topologyv1alpha1.MemberSpec
			for c := g * t.fan[tier]; c < (g+1)*t.fan[tier]; c++ {
				if tier == 1 {
					ms = append(ms, exactNode(t.nodeName(c)))
				} else {
					ms = append(ms, exactHyper(t.hyperName(tier-1, c)))
				}
			}
			return env.Client.Create(ctx, &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: t.hyperName(tier, g)},
				Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, Members: ms}})
		})
	}
}

// createReadyNode creates a Ready node with the labels, capacity and taints (no kubelet: the status
// is written here).
func createReadyNode(ctx context.Context, cs kubernetes.Interface, name string, labels map[string]string, res corev1.ResourceList, taints []corev1.Taint) error {
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status = corev1.NodeStatus{Capacity: res, Allocatable: res, Phase: corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	n.Spec.Taints = taints // TaintNodesByCondition gave the new node a not-ready taint
	_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

// peerGang is one gang of the workload.
type peerGang struct {
	name string
	size int
	soft bool
	tier int // highestTierAllowed of a hard gang: the lowest tier that holds it on empty nodes
	sub  int // pods of each sub-group (HB_PEERS_SUBGROUPS), each hard inside one tier-1 HyperNode; 0: none
}

// peerSubGroupLabel is the label that names a pod's sub-group (its index in the gang / sub) on the
// pods of hyperbatch's runs; Kueue's slices are consecutive completion indexes of its Job.
const peerSubGroupLabel = "bench.hyperbatch.dev/sub-group"

// peerSubGroupSize is HB_PEERS_SUBGROUPS: split every gang into sub-groups of that many pods (a gang
// smaller than that is one sub-group), each required inside one tier-1 HyperNode (a rack), the gang
// keeping its own constraint; 0 (unset) for gangs without sub-groups. It must divide every gang size
// larger than itself (8, 32, 128).
func peerSubGroupSize() int {
	var n int
	if _, err := fmt.Sscanf(os.Getenv("HB_PEERS_SUBGROUPS"), "%d", &n); err != nil || n < 1 {
		return 0
	}
	return n
}

const (
	peerRounds    = 8 // rounds of one gang of each size
	peerSoftEvery = 4 // every 4th gang (in submission order) is soft
)

// peerWorkload is peerRounds gangs of 8, 32 and 128 pods in a fixed shuffled order, every
// peerSoftEvery-th soft, the others hard with highestTierAllowed = the lowest tier that holds them.
func peerWorkload(t peerTree) []peerGang {
	sizes := shuffledSizes(peerRounds)
	out := make([]peerGang, len(sizes))
	for i, s := range sizes {
		soft := i%peerSoftEvery == peerSoftEvery-1
		mode := "h"
		if soft {
			mode = "s"
		}
		out[i] = peerGang{name: fmt.Sprintf("g%03d-%d%s", i, s, mode), size: s, soft: soft, tier: t.emptyTier(s)}
		if sub := peerSubGroupSize(); sub > 0 {
			out[i].sub = min(sub, s)
		}
	}
	return out
}
