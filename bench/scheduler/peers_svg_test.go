package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hyperbatch/hyperbatch/internal/placementsvg"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Placement pictures (bench/results/placement-<size>.svg), drawn from the peers benchmark's own
// data through internal/placementsvg (the drawing `kubectl hyperbatch topology --svg` shares): one
// panel per scheduler (its first run), the HyperNode tree as rows of nodes, every pod a cell
// coloured by its gang.
//
// A row is rowsPer HyperNodes of the tree's rowTier; HyperNodes of its gapTier are grey blocks with
// a small gap between them (a wider one between row-tier HyperNodes). A node is one column of
// peerSlots cells (its 8 CPUs); its pods fill the column from the bottom. A gang kept together
// is one solid block of colour; a scattered gang is confetti across the picture.

func (t peerTree) rowsPer() int {
	if t.span(t.rowTier) < 100 {
		return 2
	}
	return 1
}

// svgRows lays the tree out: rows of rowsPer row-tier HyperNodes, each a segment of gap-tier groups.
func (t peerTree) svgRows() []placementsvg.Row {
	rs, gs := t.span(t.rowTier), t.span(t.gapTier)
	per := rs * t.rowsPer()
	var rows []placementsvg.Row
	for first := 0; first < t.nodes; first += per {
		row := placementsvg.Row{Label: t.hyperName(t.rowTier, first/rs)}
		for s := first; s < min(first+per, t.nodes); s += rs {
			var seg placementsvg.Segment
			for g := s; g < min(s+rs, t.nodes); g += gs {
				grp := placementsvg.Group{Name: t.hyperName(t.gapTier, g/gs)}
				for n := g; n < min(g+gs, t.nodes); n++ {
					grp.Nodes = append(grp.Nodes, t.nodeName(n))
				}
				seg.Groups = append(seg.Groups, grp)
			}
			row.Segments = append(row.Segments, seg)
		}
		rows = append(rows, row)
	}
	return rows
}

// writePlacementSVG writes bench/results/placement-<size>.svg, or placement-<size>-<rows>.svg for a
// run of the rows HB_PEERS_SCHEDULERS names (only, joined by "-").
func writePlacementSVG(t peerTree, only string, aggs []peerAgg) error {
	svg := placementSVG(t, aggs)
	name := "placement-" + t.label
	if only != "" {
		name += "-" + strings.ReplaceAll(only, ",", "-")
	}
	if sub := peerSubGroupSize(); sub > 0 {
		name += fmt.Sprintf("-subgroups%d", sub)
	}
	path := filepath.Join(framework.RepoRoot(), "bench", "results", name+".svg")
	return os.WriteFile(path, []byte(svg), 0o644)
}

func placementSVG(t peerTree, aggs []peerAgg) string {
	gangs := peerWorkload(t)
	pic := placementsvg.Picture{
		Title: fmt.Sprintf("Placement of one workload run per scheduler, size %s: %d nodes × %d CPU slots, rows = %s HyperNodes, grey blocks = %s HyperNodes; one colour per gang",
			t.label, t.nodes, t.peerSlots, t.tierLabels[t.rowTier], t.tierLabels[t.gapTier]),
		Slots:       t.peerSlots,
		Rows:        t.svgRows(),
		LegendTitle: "Gangs in submission order (h = hard, highestTierAllowed = the lowest tier that holds the gang; s = soft)",
	}
	for _, g := range gangs {
		limit := "soft"
		if !g.soft {
			limit = fmt.Sprintf("hard, tier <= %d", g.tier)
		}
		pic.Gangs = append(pic.Gangs, placementsvg.Gang{Name: g.name, Note: limit})
	}
	for k, s := range peerScheds {
		if len(aggs[k].runs) == 0 {
			pic.Panels = append(pic.Panels, placementsvg.Panel{Empty: true})
			continue
		}
		r := aggs[k].runs[0]
		var leaves []string
		for _, size := range tpGangSizes {
			if v := r.leaves[size]; v[1] > 0 {
				leaves = append(leaves, fmt.Sprintf("%d:%.1f", size, float64(v[0])/float64(v[1])))
			}
		}
		panel := placementsvg.Panel{Name: s.name,
			Subtitle: fmt.Sprintf("lowest tier %d/%d; %s/gang %s", r.lowest, r.gangs, t.tierLabels[1], strings.Join(leaves, " "))}
		// Pods: per node, from the bottom, in gang submission order.
		for gi, g := range gangs {
			counts := map[int]int{}
			var order []int
			for _, n := range r.nodesOf[g.name] {
				if n < 0 {
					continue
				}
				if counts[n] == 0 {
					order = append(order, n)
				}
				counts[n]++
			}
			for _, n := range order {
				panel.Pods = append(panel.Pods, placementsvg.Pods{Gang: gi, Node: t.nodeName(n), Count: counts[n]})
			}
		}
		pic.Panels = append(pic.Panels, panel)
	}
	return pic.SVG()
}
