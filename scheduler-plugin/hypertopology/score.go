package hypertopology

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

const scoreKey fwk.StateKey = "hyperbatch.dev/" + Name + "/score"

type scoreState struct{ scores map[string]int64 }

func (s *scoreState) Clone() fwk.StateData { return s }

// PreScore computes every candidate node's score in one pass over the tree:
//
//	locality: 100 × (R − r) / R, where r is the rank of the lowest tier shared by the node and the
//	          gang's placed pods (0 = lowest tier, R−1 = the root) and R the number of tiers + 1;
//	          0 for every node while the gang has no pod placed yet;
//	leafFill: 100 × min(room, need) / need for the node's lowest HyperNode, room being how many of
//	          the gang's pods it held when the domain was chosen, so a gang spanning several leaves
//	          starts in the roomiest and uses as few as possible.
//
// The score is locality × localityWeight + leafFill × leafFillWeight, normalized to 0..100.
func (p *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	st := readState(cs)
	wl, wf := int64(*p.args.ScoreWeights.Locality), int64(*p.args.ScoreWeights.LeafFill)
	if st == nil || st.spec == nil || (wl == 0 && wf == 0) {
		return fwk.NewStatus(fwk.Skip)
	}
	placed := p.res.Placed(st.key, p.members(st.key))
	var placedNodes []string
	seen := map[string]bool{}
	for _, n := range placed {
		if !seen[n] {
			seen[n] = true
			placedNodes = append(placedNodes, n)
		}
	}
	scores := make(map[string]int64, len(nodes))
	p.tree.Read(func(t topology.Tree) {
		if ok, _ := t.Ready(); !ok {
			return
		}
		tiers := t.Tiers()
		R := int64(len(tiers) + 1)
		rank := make(map[int]int64, len(tiers))
		for i, tier := range tiers {
			rank[tier] = int64(i)
		}
		var chain map[*topology.HyperNode]bool
		if anchor := t.LCA(placedNodes); anchor != nil {
			chain = map[*topology.HyperNode]bool{}
			for a := anchor; a != nil; a = a.Parent {
				chain[a] = true
			}
		}
		var rooms []int32
		need := int64(1)
		if st.plan != nil && st.plan.treeGen == t.Generation() {
			rooms = st.plan.rooms
			need = int64(max(st.plan.need, 1))
		}
		for _, ni := range nodes {
			node := ni.Node()
			if node == nil {
				continue
			}
			cont := t.Containers(node.Name)
			var loc, fill int64
			if chain != nil {
				r := R - 1 // only the root is shared
				for _, h := range cont {
					if chain[h] {
						r = rank[h.Tier]
						break
					}
				}
				loc = 100 * (R - r) / R
			}
			// rooms belongs to the plan's tree generation; the bound check guards against a plan that
			// does not match this tree's indexes (an index past the end would panic the scheduler).
			if rooms != nil && len(cont) > 0 && cont[0].Index < len(rooms) {
				fill = 100 * min(int64(rooms[cont[0].Index]), need) / need
			}
			scores[node.Name] = wl*loc + wf*fill
		}
	})
	cs.Write(scoreKey, &scoreState{scores: scores})
	return nil
}

// Score returns the node's precomputed score.
func (p *Plugin) Score(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	d, err := cs.Read(scoreKey)
	if err != nil {
		return 0, nil
	}
	s, _ := d.(*scoreState)
	if s == nil || ni.Node() == nil {
		return 0, nil
	}
	return s.scores[ni.Node().Name], nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (p *Plugin) ScoreExtensions() fwk.ScoreExtensions { return p }

// NormalizeScore scales scores to 0..MaxNodeScore.
func (p *Plugin) NormalizeScore(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var hi int64
	for _, s := range scores {
		hi = max(hi, s.Score)
	}
	if hi == 0 {
		return nil
	}
	for i := range scores {
		scores[i].Score = scores[i].Score * fwk.MaxScore / hi
	}
	return nil
}
