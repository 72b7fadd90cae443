package preempt

import (
	"errors"
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
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/domain"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

const (
	nodeCPU = 8 // cores per node
	podCPU  = 2 // cores per pod, victims and preemptor alike
)

func cpu(n int) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(n), resource.DecimalSI)}
}

func member(typ topologyv1alpha1.MemberType, name string) topologyv1alpha1.MemberSpec {
	return topologyv1alpha1.MemberSpec{Type: typ, Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: name}}}
}

// instance is a random cluster: leaves of 8 nodes (tier 1), two leaves per spine (tier 2), full of
// victim units of 2-cpu pods.
type instance struct {
	cache  *topology.Cache
	leaves int
	nodes  []string
	leafOf map[string]int
	units  []*Unit
	used   map[string]int // cpu used per node
	// groupFit, when set, is the brute force's own test that a gang's sub-groups fit in the domain
	// (its nodes) with free cpu per node.
	groupFit func(dom []string, free map[string]int) bool
}

func newInstance(rng *rand.Rand, leaves int, now time.Time) *instance {
	in := &instance{cache: topology.NewCache(), leaves: leaves, leafOf: map[string]int{}, used: map[string]int{}}
	for l := 0; l < leaves; l++ {
		var ms []topologyv1alpha1.MemberSpec
		for i := 0; i < 8; i++ {
			n := fmt.Sprintf("n%d-%d", l, i)
			in.nodes = append(in.nodes, n)
			in.leafOf[n] = l
			in.cache.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
			ms = append(ms, member(topologyv1alpha1.MemberTypeNode, n))
		}
		in.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("leaf-%d", l)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: ms}})
	}
	for s := 0; s*2 < leaves; s++ {
		ms := []topologyv1alpha1.MemberSpec{member(topologyv1alpha1.MemberTypeHyperNode, fmt.Sprintf("leaf-%d", 2*s))}
		if 2*s+1 < leaves {
			ms = append(ms, member(topologyv1alpha1.MemberTypeHyperNode, fmt.Sprintf("leaf-%d", 2*s+1)))
		}
		in.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spine-%d", s)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: ms}})
	}
	// Fill about 85% of the cluster: gangs of 1-6 pods (mostly inside one leaf, sometimes across)
	// and lone pods, priorities 0, 5 or 10, started up to an hour ago.
	for tries := 0; tries < 200 && in.fill() < 0.85; tries++ {
		size, isGang := 1, rng.Intn(3) > 0
		if isGang {
			size = 1 + rng.Intn(6)
		}
		home := rng.Intn(leaves)
		u := &Unit{Key: fmt.Sprintf("ns/u%d", len(in.units)), Gang: isGang, Priority: int32([]int{0, 5, 10}[rng.Intn(3)])}
		for p := 0; p < size; p++ {
			l := home
			if rng.Intn(6) == 0 {
				l = rng.Intn(leaves)
			}
			var n string
			for _, i := range rng.Perm(8) {
				if c := fmt.Sprintf("n%d-%d", l, i); in.used[c]+podCPU <= nodeCPU {
					n = c
					break
				}
			}
			if n == "" {
				break
			}
			in.used[n] += podCPU
			u.Pods = append(u.Pods, Pod{Namespace: "ns", Name: fmt.Sprintf("%s-%d", u.Key[3:], p), UID: types.UID(fmt.Sprintf("%s-%d", u.Key, p)),
				Node: n, Requests: cpu(podCPU), Started: now.Add(-time.Duration(rng.Intn(3600)) * time.Second)})
		}
		if len(u.Pods) > 0 {
			in.units = append(in.units, u)
		}
	}
	return in
}

func (in *instance) fill() float64 {
	total := 0
	for _, n := range in.nodes {
		total += in.used[n]
	}
	return float64(total) / float64(nodeCPU*len(in.nodes))
}

func (in *instance) nodeInfos() []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for _, n := range in.nodes {
		var pods []*corev1.Pod
		for _, u := range in.units {
			for _, p := range u.Pods {
				if p.Node == n {
					pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
						Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: p.Requests}}}}})
				}
			}
		}
		ni := framework.NewNodeInfo(pods...)
		alloc := cpu(nodeCPU)
		alloc[corev1.ResourcePods] = resource.MustParse("110")
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}})
		out = append(out, ni)
	}
	return out
}

// bruteForce is the reference: for each tier up to maxTier, every domain of it and every subset of
// the units; the cheapest subset of the lowest tier where any subset makes room, by the same Cost
// order, with fit and cost computed here from scratch.
//
// budgets are the PodDisruptionBudgets' allowed disruptions (Pod.Budgets index them; nil for none):
// a subset's violations are counted from scratch the way DefaultPreemption counts one node's victims,
// pods in the order of the candidate list, each taking one from each of its budgets and violating when
// one goes below zero.
func (in *instance) bruteForce(need, maxTier int, eligible func(*Unit) bool, now time.Time, budgets []int32) (tier int, best *Cost) {
	for tier = 1; tier <= maxTier; tier++ {
		var domains [][]string
		if tier == 1 {
			for l := 0; l < in.leaves; l++ {
				domains = append(domains, in.nodes[l*8:(l+1)*8])
			}
		} else {
			for s := 0; s*2 < in.leaves; s++ {
				domains = append(domains, in.nodes[2*s*8:min(2*s+2, in.leaves)*8])
			}
		}
		for _, dom := range domains {
			var cands []*Unit
			for _, u := range in.units {
				if eligible(u) {
					cands = append(cands, u)
				}
			}
			if len(cands) > 16 {
				panic("instance too big for the brute force")
			}
			for mask := 0; mask < 1<<len(cands); mask++ {
				free := map[string]int{}
				for _, n := range dom {
					free[n] = nodeCPU - in.used[n]
				}
				c := Cost{}
				by := map[int32]int{}
				left := append([]int32(nil), budgets...)
				for i, u := range cands {
					if mask&(1<<i) == 0 {
						continue
					}
					by[u.Priority]++
					for _, p := range u.Pods {
						violates := false
						for _, b := range p.Budgets {
							left[b]--
							violates = violates || left[b] < 0
						}
						if violates {
							c.PDBViolations++
						}
						c.Pods++
						c.RunTime += now.Sub(p.Started)
						if _, ok := free[p.Node]; ok {
							free[p.Node] += podCPU
						}
					}
				}
				room := 0
				for _, f := range free {
					room += f / podCPU
				}
				if room < need {
					continue
				}
				if in.groupFit != nil && !in.groupFit(dom, free) {
					continue
				}
				for _, p := range []int32{10, 5, 0} {
					if by[p] > 0 {
						c.Units = append(c.Units, PriorityCount{Priority: p, Count: by[p]})
					}
				}
				if best == nil || c.Less(*best) {
					cc := c
					best = &cc
				}
			}
		}
		if best != nil {
			return tier, best
		}
	}
	return 0, nil
}

// compareWithBruteForce runs Choose for a gang of need pods limited to maxTier on the instance's
// eligible units, and the brute force, and fails the test unless both find no domain, or the same
// tier at the same least cost with an exact search. It returns Choose's result and the brute
// force's cost (nil: no domain).
func compareWithBruteForce(t *testing.T, i int, in *instance, units []*Unit, need, maxTier int, eligible func(*Unit) bool, now time.Time, budgets []int32) (*Result, *Cost) {
	t.Helper()
	req := Request{Topology: true, Limit: gang.Limit{Hard: true, Tier: maxTier, Describe: fmt.Sprintf("highestTierAllowed %d", maxTier)}, Now: now, Budgets: budgets}
	for p := 0; p < need; p++ {
		req.Pods = append(req.Pods, cpu(podCPU))
	}
	var got *Result
	var err error
	in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), units, req) })
	wantTier, want := in.bruteForce(need, maxTier, eligible, now, budgets)
	if want == nil {
		if err == nil {
			t.Fatalf("instance %d: brute force finds no domain, Choose found %s with %v", i, got.Describe(), got.Cost)
		}
		return nil, nil
	}
	if err != nil {
		t.Fatalf("instance %d: Choose: %v; brute force: tier %d cost %v", i, err, wantTier, *want)
	}
	if got.Tier != wantTier || want.Less(got.Cost) || got.Cost.Less(*want) {
		t.Fatalf("instance %d: Choose cleared %s at cost %v; brute force: tier %d cost %v", i, got.Describe(), got.Cost, wantTier, *want)
	}
	if !got.Exact {
		t.Fatalf("instance %d: search hit the budget on a small instance", i)
	}
	return got, want
}

// TestChooseMatchesBruteForce compares Choose with the brute force on random instances of up to 4
// leaves × 8 nodes: same tier and same least cost, and the victims really make room.
func TestChooseMatchesBruteForce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewSource(26))
	checked, withVictims := 0, 0
	for i := 0; i < 200; i++ {
		in := newInstance(rng, 1+rng.Intn(4), now)
		below := int32([]int{5, 10, 50}[rng.Intn(3)]) // the preemptor's priority: victims are below it
		eligible := func(u *Unit) bool { return u.Priority < below }
		units := eligibleUnits(in.units, eligible)
		if len(units) > 12 {
			continue
		}
		need := 2 + rng.Intn(20)
		got, want := compareWithBruteForce(t, i, in, units, need, 1+rng.Intn(2), eligible, now, nil)
		checked++
		if want == nil {
			continue
		}
		// The victims really make room in the chosen domain.
		room := 0
		freed := map[string]int{}
		for _, u := range got.Victims {
			if u.Priority >= below {
				t.Fatalf("instance %d: victim %s has priority %d, not below %d", i, u.Key, u.Priority, below)
			}
			for _, p := range u.Pods {
				freed[p.Node] += podCPU
			}
		}
		var h *topology.HyperNode
		in.cache.Read(func(tr topology.Tree) { h = tr.Get(got.HyperNode) })
		for _, n := range in.nodes {
			if h.HasNode(n) {
				room += (nodeCPU - in.used[n] + freed[n]) / podCPU
			}
		}
		if room < need {
			t.Fatalf("instance %d: victims of %s leave room for %d pods, need %d", i, got.Describe(), room, need)
		}
		if len(got.Victims) > 0 {
			withVictims++
		}
	}
	t.Logf("%d instances checked, %d with victims", checked, withVictims)
	if withVictims < 30 {
		t.Fatalf("only %d instances needed victims: the generator does not exercise the search", withVictims)
	}
}

func TestCostOrder(t *testing.T) {
	a := Cost{Units: []PriorityCount{{Priority: 5, Count: 1}}, Pods: 30}
	b := Cost{Units: []PriorityCount{{Priority: 5, Count: 2}}, Pods: 2}
	c := Cost{Units: []PriorityCount{{Priority: 1, Count: 9}}, Pods: 90}
	d := Cost{PDBViolations: 1}
	if !a.Less(b) || b.Less(a) || !c.Less(a) || a.Less(c) || !a.Less(d) || a.Less(a) {
		t.Fatal("cost order is wrong")
	}
	young := Cost{Units: []PriorityCount{{Priority: 5, Count: 1}}, Pods: 30, RunTime: time.Minute}
	if !young.Less(Cost{Units: []PriorityCount{{Priority: 5, Count: 1}}, Pods: 30, RunTime: time.Hour}) {
		t.Fatal("younger victims must cost less")
	}
}

// TestChooseSharedBudgetsMatchBruteForce: random instances as above whose pods count against a
// few shared PodDisruptionBudgets (0-3 disruptions allowed each): Choose charges the whole victim
// set against the shared budgets, and agrees with the brute force on tier and least cost.
func TestChooseSharedBudgetsMatchBruteForce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewSource(5710))
	checked, violating, shared := 0, 0, 0
	for i := 0; i < 500; i++ {
		in := newInstance(rng, 1+rng.Intn(4), now)
		below := int32([]int{5, 10, 50}[rng.Intn(3)])
		eligible := func(u *Unit) bool { return u.Priority < below }
		units := eligibleUnits(in.units, eligible)
		if len(units) > 12 {
			continue
		}
		// 1-3 budgets allowing 0-7 disruptions; most units fall under one (all their pods), some
		// pods under two.
		budgets := make([]int32, 1+rng.Intn(3))
		for b := range budgets {
			budgets[b] = int32(rng.Intn(8))
		}
		for _, u := range in.units {
			if rng.Intn(4) == 0 {
				continue // no budget
			}
			b := rng.Intn(len(budgets))
			for pi := range u.Pods {
				u.Pods[pi].Budgets = []int{b}
				if rng.Intn(8) == 0 {
					u.Pods[pi].Budgets = append(u.Pods[pi].Budgets, (b+1)%len(budgets))
				}
			}
		}
		got, want := compareWithBruteForce(t, i, in, units, 2+rng.Intn(20), 1+rng.Intn(2), eligible, now, budgets)
		checked++
		if want == nil {
			continue
		}
		if want.PDBViolations > 0 {
			violating++
		}
		// A set whose units are each within their budget yet together exceed a shared one.
		perBudget := map[int]int{}
		alone := false
		for _, u := range got.Victims {
			n := map[int]int{}
			for _, p := range u.Pods {
				for _, b := range p.Budgets {
					n[b]++
					perBudget[b]++
				}
			}
			for b, c := range n {
				if int32(c) > budgets[b] {
					alone = true
				}
			}
		}
		for b, c := range perBudget {
			if int32(c) > budgets[b] && !alone {
				shared++
				break
			}
		}
	}
	t.Logf("%d instances checked, %d with violations, %d chosen sets violate only through a shared budget", checked, violating, shared)
	if violating < 20 || shared < 5 {
		t.Fatalf("%d instances had violations, %d only through a shared budget: the generator does not exercise the budgets", violating, shared)
	}
}

// fullLeaves is an instance of the given number of tier-1 leaves of nodesPerLeaf nodes each (named
// n<leaf>-<i>, leaf-<leaf>), every node fully used; the caller adds the units.
func fullLeaves(leaves, nodesPerLeaf int) *instance {
	in := &instance{cache: topology.NewCache(), leaves: leaves, leafOf: map[string]int{}, used: map[string]int{}}
	for l := 0; l < leaves; l++ {
		var ms []topologyv1alpha1.MemberSpec
		for i := 0; i < nodesPerLeaf; i++ {
			n := fmt.Sprintf("n%d-%d", l, i)
			in.nodes = append(in.nodes, n)
			in.cache.AddOrUpdateNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
			ms = append(ms, member(topologyv1alpha1.MemberTypeNode, n))
			in.used[n] = nodeCPU
		}
		in.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("leaf-%d", l)},
			Spec: topologyv1alpha1.HyperNodeSpec{Tier: 1, Members: ms}})
	}
	return in
}

// TestPDBViolationsChargedPerSharedBudget: two gangs of 2 pods under one budget that allows 2
// disruptions are each within it, but together take it 2 below zero: their set costs 2 violations,
// while a single gang of 4 pods under its own budget of 4 costs none and wins although it is more
// pods.
func TestPDBViolationsChargedPerSharedBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := fullLeaves(2, 2)
	// leaf-0: gangs a and b, 4 pods each (one node each), both under budget 0 (allows 4);
	// leaf-1: gang c, 8 pods over both nodes, under budget 1 (allows 8).
	mk := func(key string, nodes []string, budget int) *Unit {
		u := &Unit{Key: key, Gang: true}
		for i := 0; i < 4*len(nodes); i++ {
			u.Pods = append(u.Pods, Pod{Namespace: "ns", Name: fmt.Sprintf("%s-%d", key, i), UID: types.UID(fmt.Sprintf("%s-%d", key, i)), Node: nodes[i/4],
				Requests: cpu(podCPU), Started: now.Add(-time.Minute), Budgets: []int{budget}})
		}
		return u
	}
	in.units = []*Unit{mk("ns/a", in.nodes[0:1], 0), mk("ns/b", in.nodes[1:2], 0), mk("ns/c", in.nodes[2:4], 1)}
	req := Request{Topology: true, Limit: gang.Limit{Hard: true, Tier: 1}, Now: now, Budgets: []int32{4, 8}}
	for p := 0; p < 8; p++ { // the whole leaf
		req.Pods = append(req.Pods, cpu(podCPU))
	}
	var got *Result
	var err error
	in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), in.units, req) })
	if err != nil || got.HyperNode != "leaf-1" || got.Cost.PDBViolations != 0 {
		t.Fatalf("got %+v, %v; want leaf-1 (gang c, within its budget)", got, err)
	}
	// Without gang c, leaf-0 is the only way: a and b are each within budget 0, together 4 over it.
	in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), in.units[:2], req) })
	if err != nil || got.HyperNode != "leaf-0" || got.Cost.PDBViolations != 4 || len(got.Victims) != 2 {
		t.Fatalf("got %+v, %v; want leaf-0 with a and b and 4 violations of their shared budget", got, err)
	}
}

// TestChoosePrefersDomainsWithoutPDBViolations: a leaf whose single victim is under a budget
// loses to a leaf that needs two victims but violates none; with no other way the violating leaf
// is chosen and the violation is in the cost.
func TestChoosePrefersDomainsWithoutPDBViolations(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := fullLeaves(2, 8)
	// leaf-0: one gang of 32 pods under a budget; leaf-1: two gangs of 16.
	mk := func(key string, nodes []string, pdb bool) *Unit {
		u := &Unit{Key: key, Gang: true}
		for i := 0; i < 4*len(nodes); i++ {
			n := nodes[i/4]
			p := Pod{Namespace: "ns", Name: fmt.Sprintf("%s-%d", key, i), UID: types.UID(fmt.Sprintf("%s-%d", key, i)), Node: n,
				Requests: cpu(podCPU), Started: now.Add(-time.Minute)}
			if pdb {
				p.Budgets = []int{0}
			}
			u.Pods = append(u.Pods, p)
		}
		return u
	}
	guarded := mk("ns/guarded", in.nodes[:8], true)
	in.units = []*Unit{guarded, mk("ns/a", in.nodes[8:12], false), mk("ns/b", in.nodes[12:16], false)}
	req := Request{Topology: true, Limit: gang.Limit{Hard: true, Tier: 1}, Now: now, Budgets: []int32{0}} // the budget allows none
	for p := 0; p < 32; p++ {
		req.Pods = append(req.Pods, cpu(podCPU))
	}
	var got *Result
	var err error
	in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), in.units, req) })
	if err != nil || got.HyperNode != "leaf-1" || got.Cost.PDBViolations != 0 || len(got.Victims) != 2 {
		t.Fatalf("got %+v, %v; want leaf-1 with 2 victims and no violation", got, err)
	}
	// Only the guarded leaf is left: it is cleared, and the violations are reported in the cost.
	// (leaf-1's pods stay on its nodes but are not listed as victims: nobody may evict them.)
	in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), in.units[:1], req) })
	if err != nil || got.HyperNode != "leaf-0" || got.Cost.PDBViolations != 32 {
		t.Fatalf("got %+v, %v; want leaf-0 with 32 violations", got, err)
	}
}

// eligibleUnits are the units of all that eligible accepts, in order.
func eligibleUnits(all []*Unit, eligible func(*Unit) bool) []*Unit {
	var units []*Unit
	for _, u := range all {
		if eligible(u) {
			units = append(units, u)
		}
	}
	return units
}

// TestChooseFreesRoomInTheSubGroupsShape: a gang of two sub-groups of 8 pods, each required whole in
// one leaf (tier 1), the gang in one spine (tier 2); leaves of two nodes of 4 pods each. leaf-0 is
// free; leaf-1 and leaf-2 each have one node taken by pods that may not be evicted and one by a young
// victim gang; leaf-3 has two older victim gangs. Evicting the two young gangs is the cheapest flat
// room (16 pods in the spine) but leaves the second sub-group split over two leaves; the search with
// sub-groups evicts the two old gangs, freeing leaf-3 whole, and each victim is a whole gang.
func TestChooseFreesRoomInTheSubGroupsShape(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := fullLeaves(4, 2)
	var ms []topologyv1alpha1.MemberSpec
	for l := 0; l < 4; l++ {
		ms = append(ms, member(topologyv1alpha1.MemberTypeHyperNode, fmt.Sprintf("leaf-%d", l)))
	}
	in.cache.AddOrUpdateHyperNode(&topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: "spine-0"},
		Spec: topologyv1alpha1.HyperNodeSpec{Tier: 2, Members: ms}})
	mk := func(key, node string, age time.Duration) *Unit {
		u := &Unit{Key: key, Gang: true}
		for i := 0; i < nodeCPU/podCPU; i++ {
			u.Pods = append(u.Pods, Pod{Namespace: "ns", Name: fmt.Sprintf("%s-%d", key[3:], i), UID: types.UID(fmt.Sprintf("%s-%d", key, i)), Node: node,
				Requests: cpu(podCPU), Started: now.Add(-age)})
		}
		return u
	}
	victims := []*Unit{
		mk("ns/young-1", "n1-1", time.Minute), mk("ns/young-2", "n2-1", time.Minute),
		mk("ns/old-a", "n3-0", time.Hour), mk("ns/old-b", "n3-1", time.Hour),
	}
	// Pods of higher priority than the preemptor: on their nodes, never listed as victims.
	in.units = append([]*Unit{mk("ns/keep-1", "n1-0", time.Hour), mk("ns/keep-2", "n2-0", time.Hour)}, victims...)
	tier1 := gang.Limit{Hard: true, Tier: 1, Describe: "tier 1"}
	req := Request{Topology: true, Limit: gang.Limit{Hard: true, Tier: 2, Describe: "tier 2"}, Now: now}
	for p := 0; p < 16; p++ {
		req.Pods = append(req.Pods, cpu(podCPU))
	}
	choose := func(req Request) *Result {
		t.Helper()
		var got *Result
		var err error
		in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), victims, req) })
		if err != nil {
			t.Fatalf("Choose: %v", err)
		}
		return got
	}
	keys := func(r *Result) []string {
		var out []string
		for _, u := range r.Victims {
			out = append(out, u.Key)
		}
		return out
	}

	// Flat, the two young gangs are the cheapest room (equal units and pods, less run time lost).
	flat := choose(req)
	if got := fmt.Sprint(keys(flat)); flat.HyperNode != "spine-0" || got != "[ns/young-1 ns/young-2]" {
		t.Fatalf("flat gang: cleared %s evicting %s; want spine-0 evicting [ns/young-1 ns/young-2]", flat.Describe(), got)
	}

	req.Groups = []domain.Group{
		{Name: "tp[0]", Pods: 8, Topology: true, Limit: tier1, Required: true},
		{Name: "tp[1]", Pods: 8, Topology: true, Limit: tier1, Required: true},
	}
	got := choose(req)
	if k := fmt.Sprint(keys(got)); got.HyperNode != "spine-0" || k != "[ns/old-a ns/old-b]" || !got.Exact {
		t.Fatalf("sub-grouped gang: cleared %s evicting %s (exact %v); want spine-0 evicting [ns/old-a ns/old-b]", got.Describe(), k, got.Exact)
	}
	// Victims are whole gangs: every pod of each.
	for _, u := range got.Victims {
		if !u.Gang || len(u.Pods) != nodeCPU/podCPU {
			t.Fatalf("victim %s: gang %v with %d pods; want the whole gang of %d", u.Key, u.Gang, len(u.Pods), nodeCPU/podCPU)
		}
	}
	// The freed room is leaf-3's two nodes, whole: with it, the domain chooser places both
	// sub-groups, each in one leaf.
	if len(got.Freed) != 2 || got.Freed["n3-0"].Pods != 4 || got.Freed["n3-1"].Pods != 4 {
		t.Fatalf("freed %v; want 4 pods on each of n3-0 and n3-1", got.Freed)
	}
	var gc *domain.GroupChoice
	var err error
	in.cache.Read(func(tr topology.Tree) {
		gc, err = domain.ChooseGroups(tr, in.nodeInfos(), domain.GroupRequest{
			Request: domain.Request{Demand: domain.Demand{Pods: []corev1.ResourceList{cpu(podCPU)}}, Topology: true, Limit: req.Limit, Freed: got.Freed},
			Groups:  req.Groups})
	})
	if err != nil {
		t.Fatalf("ChooseGroups after the eviction: %v", err)
	}
	leaves := map[string]bool{}
	for _, g := range gc.Groups {
		if !g.Placed || g.Tier != 1 {
			t.Fatalf("sub-group %s placed %v in %s (tier %d); want one leaf", g.Name, g.Placed, g.HyperNode, g.Tier)
		}
		leaves[g.HyperNode] = true
	}
	if !leaves["leaf-0"] || !leaves["leaf-3"] {
		t.Fatalf("sub-groups in %v; want leaf-0 and leaf-3", leaves)
	}

	// With only the young gangs to take, no victim set lets the sub-groups fit: nothing is evicted.
	var err2 error
	in.cache.Read(func(tr topology.Tree) { _, err2 = Choose(tr, in.nodeInfos(), victims[:2], req) })
	var nd *NoDomain
	if !errors.As(err2, &nd) {
		t.Fatalf("with only the young gangs: err %v; want a *NoDomain", err2)
	}
}

// TestChooseWithSubGroupsMatchesBruteForce: on random instances, a gang of 2 or 3 sub-groups (4 to
// 12 pods each, each hard in one leaf, the gang within one spine) gets the same tier and least cost
// as a brute force over every domain and victim subset whose own test assigns the sub-groups to the
// domain's leaves; and the domain chooser places the sub-groups in the room the victims free.
func TestChooseWithSubGroupsMatchesBruteForce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewSource(37))
	tier1 := gang.Limit{Hard: true, Tier: 1, Describe: "highestTierAllowed 1"}
	checked, withVictims, differ := 0, 0, 0
	for i := 0; i < 600; i++ {
		in := newInstance(rng, 2+rng.Intn(3), now)
		below := int32([]int{5, 10}[rng.Intn(2)]) // the preemptor's priority: victims are below it
		eligible := func(u *Unit) bool { return u.Priority < below }
		units := eligibleUnits(in.units, eligible)
		if len(units) > 12 {
			continue
		}
		var sizes []int
		need := 0
		req := Request{Topology: true, Limit: gang.Limit{Hard: true, Tier: 2, Describe: "highestTierAllowed 2"}, Now: now}
		for g := 0; g < 2+rng.Intn(2); g++ {
			n := 4 + rng.Intn(9)
			sizes = append(sizes, n)
			need += n
			req.Groups = append(req.Groups, domain.Group{Name: fmt.Sprintf("tp[%d]", g), Pods: n, Topology: true, Limit: tier1, Required: true})
		}
		req.Pods = []corev1.ResourceList{cpu(podCPU)}
		// The reference: each sub-group into one leaf of the domain, every assignment tried.
		in.groupFit = func(dom []string, free map[string]int) bool {
			room := map[int]int{}
			for _, n := range dom {
				room[in.leafOf[n]] += free[n] / podCPU
			}
			var assign func(g int) bool
			assign = func(g int) bool {
				if g == len(sizes) {
					return true
				}
				for l, r := range room {
					if r >= sizes[g] {
						room[l] -= sizes[g]
						ok := assign(g + 1)
						room[l] += sizes[g]
						if ok {
							return true
						}
					}
				}
				return false
			}
			return assign(0)
		}
		var got *Result
		var err error
		in.cache.Read(func(tr topology.Tree) { got, err = Choose(tr, in.nodeInfos(), units, req) })
		wantTier, want := in.bruteForce(need, 2, eligible, now, nil)
		checked++
		if want == nil {
			if err == nil {
				t.Fatalf("instance %d: brute force finds no domain, Choose cleared %s at %v", i, got.Describe(), got.Cost)
			}
			continue
		}
		if err != nil {
			t.Fatalf("instance %d: Choose: %v; brute force: tier %d cost %v", i, err, wantTier, *want)
		}
		if got.Tier != wantTier || want.Less(got.Cost) || got.Cost.Less(*want) || !got.Exact {
			t.Fatalf("instance %d: Choose cleared %s at %v (exact %v); brute force: tier %d cost %v", i, got.Describe(), got.Cost, got.Exact, wantTier, *want)
		}
		if len(got.Victims) > 0 {
			withVictims++
		}
		// Without the sub-groups' test the flat cheapest may differ: count how often it does.
		in.groupFit = nil
		if _, flat := in.bruteForce(need, 2, eligible, now, nil); flat == nil || flat.Less(*want) {
			differ++
		}
		// The domain chooser agrees: the sub-groups fit in the freed room.
		in.cache.Read(func(tr topology.Tree) {
			_, err = domain.ChooseGroups(tr, in.nodeInfos(), domain.GroupRequest{
				Request: domain.Request{Demand: domain.Demand{Pods: req.Pods}, Topology: true, Limit: req.Limit, Freed: got.Freed},
				Groups:  req.Groups})
		})
		if err != nil {
			t.Fatalf("instance %d: after clearing %s the domain chooser does not place the sub-groups: %v", i, got.Describe(), err)
		}
	}
	t.Logf("%d instances checked, %d with victims, %d where the flat cheapest set would not fit the sub-groups", checked, withVictims, differ)
	if withVictims < 50 || differ < 5 {
		t.Fatalf("only %d instances with victims and %d where the shape matters: the generator does not exercise the search", withVictims, differ)
	}
}
