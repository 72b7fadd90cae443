package scheduler

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// fatTree is an n-node leaf/spine/core fabric: leaves (tier 1) of 16 nodes, spines (tier 2) of 16
// leaves, cores (tier 3) of 8 spines; about 40% of the nodes run a pod using 1-8 of their 8 GPUs.
func fatTree(b *testing.B, n int) (*topology.Cache, []fwk.NodeInfo) {
	c := topology.NewCache()
	rng := rand.New(rand.NewSource(1))
	infos := make([]fwk.NodeInfo, n)
	var leaves, spines []topologyv1alpha1.MemberSpec
	var ms []topologyv1alpha1.MemberSpec
	flush := func(tier int, name string, members *[]topologyv1alpha1.MemberSpec, up *[]topologyv1alpha1.MemberSpec) {
		c.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier, Members: *members}})
		*up = append(*up, exactHyper(name))
		*members = nil
	}
	var cores []topologyv1alpha1.MemberSpec
	for i := 0; i < n; i++ {
		nd := node(i)
		var pods []*corev1.Pod
		if rng.Intn(10) < 4 {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%d", i), Namespace: "x", UID: "busy"},
				Spec: corev1.PodSpec{NodeName: nd.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), gpu: *resource.NewQuantity(int64(rng.Intn(gpusNode)+1), resource.DecimalSI)}}}}}})
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(nd)
		infos[i] = ni
		c.AddOrUpdateNode(nd)
		ms = append(ms, exactNode(nd.Name))
		if len(ms) == 16 || i == n-1 {
			flush(1, fmt.Sprintf("leaf-%d", i/16), &ms, &leaves)
		}
		if len(leaves) == 16 || (i == n-1 && len(leaves) > 0) {
			flush(2, fmt.Sprintf("spine-%d", i/256), &leaves, &spines)
		}
		if len(spines) == 8 || (i == n-1 && len(spines) > 0) {
			flush(3, fmt.Sprintf("core-%d", i/2048), &spines, &cores)
		}
	}
	c.Read(func(t topology.Tree) {
		if ok, why := t.Ready(); !ok {
			b.Fatalf("tree not ready: %s", why)
		}
	})
	return c, infos
}

func groupsOf(k, size int, l gang.Limit, want gang.Limit) []domain.Group {
	out := make([]domain.Group, k)
	for i := range out {
		out[i] = domain.Group{Name: fmt.Sprintf("tp[%d]", i), Pods: size, Topology: true, Limit: l, Want: want, Required: true}
	}
	return out
}

// BenchmarkDomainChoiceSubGroups is one sub-grouped gang's domain choice (ChooseGroups: the gang's
// domain and every sub-group's HyperNode together) at 6,000 and 20,000 nodes, beside the flat
// choice of a gang of the same size.
func BenchmarkDomainChoiceSubGroups(b *testing.B) {
	leaf := gang.Limit{Hard: true, Tier: 1, Describe: "highestTierAllowed=1"}
	spine := gang.Limit{Hard: true, Tier: 2, Describe: "highestTierAllowed=2"}
	core := gang.Limit{Hard: true, Tier: 3, Describe: "highestTierAllowed=3"}
	soft := gang.Limit{Describe: "soft"}
	for _, n := range []int{6000, 20000} {
		c, infos := fatTree(b, n)
		cases := []struct {
			name   string
			gang   gang.Limit
			groups []domain.Group
			flat   int // pods of the flat gang instead (0: sub-grouped)
			tier   int
		}{
			{"4x8x8gpu-leaf-in-spine", spine, groupsOf(4, 8, leaf, gang.Limit{}), 0, 2},
			{"16x8x8gpu-leaf-upto-core", core, groupsOf(16, 8, leaf, gang.Limit{}), 0, 2},
			{"24x8x8gpu-leaf-upto-core", core, groupsOf(24, 8, leaf, gang.Limit{}), 0, 3},
			{"8x4x8gpu-softleaf-in-spine", spine, groupsOf(8, 4, soft, leaf), 0, 2},
			{"flat-32x8gpu-spine", spine, nil, 32, 2},
		}
		for _, tc := range cases {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, tc.name), func(b *testing.B) {
				c.Read(func(t topology.Tree) {
					run := func() (int, error) {
						if tc.flat > 0 {
							ch, err := domain.Choose(t, infos, domain.Request{Demand: domain.Demand{Pods: repeat(tc.flat, worker(8))}, Topology: true, Limit: tc.gang})
							if err != nil {
								return 0, err
							}
							return ch.Tier, nil
						}
						ch, err := domain.ChooseGroups(t, infos, domain.GroupRequest{Request: domain.Request{Demand: domain.Demand{Pods: repeat(1, worker(8))}, Topology: true, Limit: tc.gang}, Groups: tc.groups})
						if err != nil {
							return 0, err
						}
						for _, g := range ch.Groups {
							if l := tc.groups[0].Limit; l.Hard && g.Tier > l.Tier {
								return 0, fmt.Errorf("sub-group %s at tier %d", g.Name, g.Tier)
							}
						}
						if !ch.Exact {
							b.Logf("search budget reached (cost %+v)", ch.Cost)
						}
						return ch.Tier, nil
					}
					tier, err := run()
					if err != nil || tier != tc.tier {
						b.Fatalf("tier %d, err %v; want tier %d", tier, err, tc.tier)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						_, _ = run()
					}
				})
			})
		}
	}
}
