package scheduler

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/preempt"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// fullCluster fills every GPU of the benchmark tree with low-priority work: per tier-3 group of 12
// nodes, gangs of 32 one-GPU pods over 4 nodes, gangs of 8 on one node, and lone pods, priorities
// 0-3, started up to a day ago.
func fullCluster() ([]fwk.NodeInfo, []*preempt.Unit) {
	rng := rand.New(rand.NewSource(26))
	now := time.Now()
	perNode := make([][]*corev1.Pod, numNodes)
	var units []*preempt.Unit
	podOn := func(u *preempt.Unit, n int) {
		name := fmt.Sprintf("%s-%d", u.Key, len(u.Pods))
		started := now.Add(-time.Duration(rng.Intn(86400)) * time.Second)
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), gpu: *resource.NewQuantity(1, resource.DecimalSI)}
		u.Pods = append(u.Pods, preempt.Pod{Namespace: "x", Name: name, UID: types.UID(name), Node: nodeName(n), Requests: req, Started: started})
		perNode[n] = append(perNode[n], &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name, UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: nodeName(n), Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}})
	}
	for g := 0; g*12 < numNodes; g++ {
		base := g * 12
		n := base
		for n < base+12 {
			switch k := rng.Intn(3); {
			case k == 0 && n+4 <= base+12: // a gang of 32 over 4 nodes
				u := &preempt.Unit{Key: fmt.Sprintf("g32-%d", len(units)), Gang: true, Priority: int32(rng.Intn(4))}
				for i := 0; i < 32; i++ {
					podOn(u, n+i/8)
				}
				units = append(units, u)
				n += 4
			case k == 1: // a gang of 8 on one node
				u := &preempt.Unit{Key: fmt.Sprintf("g8-%d", len(units)), Gang: true, Priority: int32(rng.Intn(4))}
				for i := 0; i < 8; i++ {
					podOn(u, n)
				}
				units = append(units, u)
				n++
			default: // 8 lone pods
				for i := 0; i < 8; i++ {
					u := &preempt.Unit{Key: fmt.Sprintf("lone-%d", len(units)), Priority: int32(rng.Intn(4))}
					podOn(u, n)
					units = append(units, u)
				}
				n++
			}
		}
	}
	infos := make([]fwk.NodeInfo, numNodes)
	for i := range infos {
		ni := framework.NewNodeInfo(perNode[i]...)
		ni.SetNode(node(i))
		infos[i] = ni
	}
	return infos, units
}

// BenchmarkPreemptionChoice is one gang preemption search (preempt.Choose: which domain to clear
// and its victims) on the 6,000-node / 9,600-HyperNode tree with every GPU in use, with the
// plugin's settings (64 exact searches per tier, 4,096 search nodes each).
func BenchmarkPreemptionChoice(b *testing.B) {
	c := buildCache(b)
	infos, units := fullCluster()
	cases := []struct {
		name string
		pods int
		gpus int64
		tier int
	}{
		{"8x1gpu-hard1", 8, 1, 1},     // one node (tier 1: 6,000 candidates)
		{"64x1gpu-hard3", 64, 1, 3},   // 8 nodes of a tier-3 group
		{"32x8gpu-hard4", 32, 8, 4},   // 32 nodes: a tier-4 group
		{"128x8gpu-hard5", 128, 8, 5}, // too big for any tier-4 group (60 nodes): clears part of the cluster root
	}
	for _, tc := range cases {
		req := preempt.Request{Pods: repeat(tc.pods, worker(tc.gpus)), Topology: true,
			Limit:                gang.Limit{Hard: true, Tier: tc.tier, Describe: fmt.Sprintf("highestTierAllowed %d", tc.tier)},
			MaxCandidatesPerTier: 64, Budget: 4096, Now: time.Now()}
		b.Run(tc.name, func(b *testing.B) {
			var r *preempt.Result
			var err error
			for b.Loop() {
				c.Read(func(t topology.Tree) { r, err = preempt.Choose(t, infos, units, req) })
			}
			if err != nil {
				b.Logf("%s: %v", tc.name, err)
				return
			}
			b.ReportMetric(float64(r.VictimPods()), "victim-pods")
			b.ReportMetric(float64(r.Domains), "domains")
			b.ReportMetric(float64(r.Tier), "tier")
			if !r.Exact {
				b.ReportMetric(1, "budget-hit")
			}
		})
	}
}
