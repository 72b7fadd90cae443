package domain

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// fabric is a random tree: spines (tier 2) of leaves (tier 1) of nodes, with free[node] GPUs.
type fabric struct {
	cache *topology.Cache
	infos []fwk.NodeInfo
	free  map[string]int64
}

func randomFabric(r *rand.Rand) *fabric {
	f := &fabric{cache: topology.NewCache(), free: map[string]int64{}}
	spines := 1 + r.Intn(3)
	n := 0
	for s := 0; s < spines; s++ {
		var leaves []topologyv1alpha1.MemberSpec
		for l := 0; l < 1+r.Intn(3); l++ {
			leaf := fmt.Sprintf("leaf-%d-%d", s, l)
			var ms []topologyv1alpha1.MemberSpec
			for k := 0; k < 1+r.Intn(3); k++ {
				name := fmt.Sprintf("n%02d", n)
				n++
				node := gpuNode(name)
				ni := framework.NewNodeInfo()
				ni.SetNode(node)
				used := int64(r.Intn(9))
				if used > 0 {
					ni.AddPod(usedBy(name+"-used", rl("1", used)))
				}
				f.free[name] = 8 - used
				f.infos = append(f.infos, ni)
				f.cache.AddOrUpdateNode(node)
				ms = append(ms, member(topologyv1alpha1.MemberTypeNode, name))
			}
			f.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: leaf},
				Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: ms}})
			leaves = append(leaves, member(topologyv1alpha1.MemberTypeHyperNode, leaf))
		}
		f.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spine-%d", s)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: leaves}})
	}
	return f
}

// bruteGroups tries every gang domain and every assignment of the groups to HyperNodes inside it,
// and returns the least cost of a feasible one (false when none is).
func bruteGroups(t topology.Tree, free map[string]int64, pod int64, req GroupRequest) (GroupCost, bool) {
	rooms := func(h *topology.HyperNode) int64 {
		var s int64
		for n, f := range free {
			if h.HasNode(n) {
				s += f / pod
			}
		}
		return s
	}
	all := append(append([]*topology.HyperNode(nil), t.List()...), t.Root())
	var best GroupCost
	found := false
	lowest := t.Tiers()[0]
	for _, G := range all {
		if req.Topology && !Allows(req.Limit, G) {
			continue
		}
		if !req.Topology && !G.IsRoot() {
			continue
		}
		var inside []*topology.HyperNode
		for _, h := range all {
			if G.Contains(h) {
				inside = append(inside, h)
			}
		}
		pick := make([]*topology.HyperNode, len(req.Groups))
		var rec func(i int)
		rec = func(i int) {
			if i == len(req.Groups) {
				for _, H := range inside {
					var load int64
					for k, g := range req.Groups {
						if H.Contains(pick[k]) {
							load += int64(g.Pods)
						}
					}
					if load > rooms(H) {
						return
					}
				}
				cost := GroupCost{GangTier: G.Tier}
				leaves := map[*topology.HyperNode]bool{}
				for _, h := range pick {
					cost.TierSum += h.Tier
					if h.Tier == lowest && !h.IsRoot() {
						leaves[h] = true
					}
				}
				cost.Leaves = len(leaves)
				if !found || cost.Less(best) {
					best, found = cost, true
				}
				return
			}
			g := req.Groups[i]
			for _, h := range inside {
				if !g.Topology && h != G {
					continue
				}
				if g.Topology && g.Limit.Hard && !Allows(g.Limit, h) {
					continue
				}
				pick[i] = h
				rec(i + 1)
			}
		}
		rec(0)
	}
	return best, found
}

// bruteCases is how many random instances TestChooseGroupsMatchesBruteForce checks.
const bruteCases = 400

func TestChooseGroupsMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(37))
	const podGPU = 2
	feasible := 0
	for it := 0; it < bruteCases; it++ {
		f := randomFabric(r)
		req := GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{rl("1", podGPU)}}}}
		switch r.Intn(4) {
		case 0:
			req.Topology, req.Limit = true, hard(1)
		case 1, 2:
			req.Topology, req.Limit = true, hard(2)
		case 3:
			req.Topology, req.Limit = true, soft
		}
		// Every other case: sub-groups of one policy (one size and limit), the usual shape, which
		// the search treats as interchangeable.
		uniform := it%2 == 1
		for g := 0; g < 1+r.Intn(4); g++ {
			grp := Group{Name: fmt.Sprintf("g%d", g), Pods: 1 + r.Intn(5), Required: true, Topology: r.Intn(5) > 0}
			if grp.Topology {
				if r.Intn(3) == 0 {
					grp.Limit, grp.Want = soft, hard(1)
				} else {
					grp.Limit = hard(1 + r.Intn(2))
				}
			}
			if uniform && g > 0 {
				grp.Pods, grp.Topology, grp.Limit, grp.Want = req.Groups[0].Pods, req.Groups[0].Topology, req.Groups[0].Limit, req.Groups[0].Want
			}
			req.Groups = append(req.Groups, grp)
		}
		var got *GroupChoice
		var err error
		var want GroupCost
		var ok bool
		f.cache.Read(func(tr topology.Tree) {
			got, err = ChooseGroups(tr, f.infos, req)
			want, ok = bruteGroups(tr, f.free, podGPU, req)
			if err != nil || !ok {
				return
			}
			checkGroupChoice(t, tr, f.free, podGPU, req, got)
		})
		if ok != (err == nil) {
			t.Fatalf("case %d: brute force feasible=%v, ChooseGroups err=%v (groups %+v)", it, ok, err, req.Groups)
		}
		if !ok {
			continue
		}
		feasible++
		if got.Cost != want {
			t.Fatalf("case %d: cost %+v, brute force %+v (groups %+v, placed %+v)", it, got.Cost, want, req.Groups, got.Groups)
		}
	}
	if feasible < 100 {
		t.Fatalf("only %d of %d random cases were feasible: the generator tests too little", feasible, bruteCases)
	}
}

// checkGroupChoice verifies the quotas: every group gets its pods inside its domain, within the
// domain the gang's limit and its own hard limit allow, and no node takes more than it holds.
func checkGroupChoice(t *testing.T, tr topology.Tree, free map[string]int64, pod int64, req GroupRequest, got *GroupChoice) {
	t.Helper()
	G := tr.Get(got.HyperNode)
	if got.Root {
		G = tr.Root()
	}
	used := map[string]int64{}
	for i, gp := range got.Groups {
		g := req.Groups[i]
		if !gp.Placed {
			t.Fatalf("required group %s not placed", g.Name)
		}
		h := tr.Get(gp.HyperNode)
		if gp.Root {
			h = tr.Root()
		}
		if !G.Contains(h) || (g.Topology && g.Limit.Hard && !Allows(g.Limit, h)) || (!g.Topology && h != G) {
			t.Fatalf("group %s in %s, gang in %s: not allowed", g.Name, gp.HyperNode, got.HyperNode)
		}
		sum := 0
		for n, q := range gp.Quota {
			if !h.HasNode(n) {
				t.Fatalf("group %s quota on %s outside %s", g.Name, n, gp.HyperNode)
			}
			sum += q
			used[n] += int64(q)
		}
		if sum != g.Pods {
			t.Fatalf("group %s: quotas sum to %d, want %d", g.Name, sum, g.Pods)
		}
	}
	for n, u := range used {
		if u > free[n]/pod {
			t.Fatalf("node %s takes %d pods, holds %d", n, u, free[n]/pod)
		}
	}
}

func TestChooseGroupsFallbackAndWait(t *testing.T) {
	c := newCluster() // 4 racks of 4 nodes x 8 GPUs; spine-0 = racks 0,1; spine-1 = racks 2,3
	for _, n := range []string{"n0", "n1", "n4", "n5", "n8", "n9", "n12", "n13"} {
		c.use(n, rl("1", 8)) // every rack has 2 free nodes: 16 GPUs
	}
	worker := rl("1", 8)
	group := func(name string, pods int, l gang.Limit) Group {
		return Group{Name: name, Pods: pods, Topology: true, Limit: l, Want: hard(1), Required: true}
	}
	var got *GroupChoice
	var err error
	c.cache.Read(func(tr topology.Tree) {
		// Two sub-groups of 2 nodes fit two racks of one spine.
		got, err = ChooseGroups(tr, c.nodeInfos(), GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{worker}}, Topology: true, Limit: hard(2)},
			Groups: []Group{group("a", 2, hard(1)), group("b", 2, hard(1))}})
	})
	if err != nil || got.HyperNode != "spine-0" || got.Groups[0].HyperNode == got.Groups[1].HyperNode || got.Groups[0].Tier != 1 {
		t.Fatalf("got %+v, %v; want two racks of spine-0", got, err)
	}
	c.cache.Read(func(tr topology.Tree) {
		// A sub-group of 3 nodes fits no rack: hard waits with the numbers, soft falls back.
		_, err = ChooseGroups(tr, c.nodeInfos(), GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{worker}}, Topology: true, Limit: hard(2)},
			Groups: []Group{group("a", 3, hard(1))}})
		got, _ = ChooseGroups(tr, c.nodeInfos(), GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{worker}}, Topology: true, Limit: hard(2)},
			Groups: []Group{group("a", 3, soft)}})
	})
	if err == nil || !strings.Contains(err.Error(), "sub-group a (3 pods, highestTierAllowed=1) fits no HyperNode inside HyperNode spine-0") {
		t.Fatalf("hard sub-group of 3: err %v", err)
	}
	if got == nil || got.Groups[0].Tier != 2 || !strings.Contains(got.Groups[0].Fallback, "sub-group a (soft, wants highestTierAllowed=1) placed in HyperNode spine-0 (tier 2)") {
		t.Fatalf("soft sub-group of 3: %+v", got)
	}
}

// A gang whose required sub-groups are all placed (need 0) still gets a choice: the optional
// sub-group that has no room whole is reported as not placed, not as a required shortfall.
func TestChooseGroupsNothingRequired(t *testing.T) {
	c := newCluster() // 4 racks of 4 nodes x 8 GPUs; spine-0 = racks 0,1
	for _, n := range []string{"n0", "n1", "n2", "n4", "n5", "n6"} {
		c.use(n, rl("1", 8)) // racks 0 and 1: one free node each
	}
	worker := rl("1", 8)
	var got *GroupChoice
	var err error
	c.cache.Read(func(tr topology.Tree) {
		got, err = ChooseGroups(tr, c.nodeInfos(), GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{worker}}, Topology: true, Limit: hard(2),
			Placed: []string{"n0", "n4"}},
			Groups: []Group{
				{Name: "a", Pods: 0, Topology: true, Limit: hard(1), Placed: []string{"n0"}},
				{Name: "b", Pods: 2, Topology: true, Limit: hard(1)},
			}})
	})
	if err != nil {
		t.Fatalf("nothing required: %v", err)
	}
	if got.HyperNode != "spine-0" || got.Groups[1].Placed {
		t.Fatalf("got %s, groups %+v; want spine-0 with b not placed", got.HyperNode, got.Groups)
	}
}

// A gang whose required sub-groups fit nowhere whole gets the failure in numbers: per tier the best
// domain (binding "sub-groups" where the pods fit but the sub-groups do not), and how many
// sub-groups each gang domain holds, with the rooms of the HyperNodes their limit allows.
func TestChooseGroupsPlacementNumbers(t *testing.T) {
	c := newCluster() // 4 racks of 4 nodes x 8 GPUs; spine-0 = racks 0,1; spine-1 = racks 2,3
	for _, n := range []string{"n0", "n4", "n8", "n12"} {
		c.use(n, rl("1", 8)) // every rack has 3 free nodes: one sub-group of 2 each
	}
	var err error
	c.cache.Read(func(tr topology.Tree) {
		_, err = ChooseGroups(tr, c.nodeInfos(), GroupRequest{Request: Request{Demand: Demand{Pods: []corev1.ResourceList{rl("1", 8)}}, Topology: true, Limit: hard(2)},
			Groups: []Group{
				{Name: "a", Pods: 2, Topology: true, Limit: hard(1), Required: true},
				{Name: "b", Pods: 2, Topology: true, Limit: hard(1), Required: true},
				{Name: "c", Pods: 2, Topology: true, Limit: hard(1), Required: true},
			}})
	})
	var u *Unsatisfiable
	if !errors.As(err, &u) || u.Placement == nil {
		t.Fatalf("err %v, want an Unsatisfiable with a placement", err)
	}
	p := u.Placement
	if p.Need.Pods != 6 || len(p.Tiers) != 2 || p.Tiers[1].Binding != gangcontract.BindingSubGroups || p.Tiers[1].BestRoom != 6 {
		t.Fatalf("placement %+v", p)
	}
	sg := p.SubGroups
	if sg == nil || sg.Required != 3 || sg.Size != 2 || sg.Holds != 2 || len(sg.Domains) != 2 || sg.Limit != "highestTierAllowed=1" {
		t.Fatalf("sub-groups %+v", sg)
	}
	if d := sg.Domains[0]; d.HyperNode != "spine-0" || d.Holds != 2 || len(d.Rooms) != 2 || d.Rooms[0] != (gangcontract.NamedRoom{Name: "rack-0", Room: 3}) {
		t.Fatalf("domain %+v", d)
	}
}
