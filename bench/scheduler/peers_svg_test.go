package scheduler

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// Placement pictures (bench/results/placement-<size>.svg), drawn from the peers benchmark's own
// data with the standard library: one panel per scheduler (its first run), the HyperNode tree as
// rows of nodes, every pod a cell coloured by its gang.
//
// A row is rowsPer HyperNodes of the tree's rowTier; HyperNodes of its gapTier are grey blocks with
// a small gap between them (a wider one between row-tier HyperNodes). A node is one column of
// peerSlots cells (its 8 CPUs); its pods fill the column from the bottom. A gang kept together
// is one solid block of colour; a scattered gang is confetti across the picture.

const (
	svgCell   = 4  // pixels per pod slot (and per node column)
	svgGap    = 3  // between gap-tier HyperNodes
	svgRowGap = 10 // between row-tier HyperNodes in a row
	svgLabel  = 70 // row label margin
	svgPanelG = 30 // between panels
	svgTop    = 48 // title area
)

func (t peerTree) rowsPer() int {
	if t.span(t.rowTier) < 100 {
		return 2
	}
	return 1
}

// nodeXY is the top-left corner of node i's column within a panel (without the panel offset).
func (t peerTree) nodeXY(i int) (x, y int) {
	per := t.span(t.rowTier) * t.rowsPer()
	row, col := i/per, i%per
	gapSpan := t.span(t.gapTier)
	x = svgLabel + col*svgCell + (col/gapSpan)*svgGap + (col/t.span(t.rowTier))*(svgRowGap-svgGap)
	y = svgTop + row*(t.peerSlots*svgCell+svgGap*2)
	return x, y
}

func (t peerTree) panelSize() (w, h int) {
	per := t.span(t.rowTier) * t.rowsPer()
	x, _ := t.nodeXY(per - 1)
	_, y := t.nodeXY(t.nodes - 1)
	return x + svgCell + 10, y + t.peerSlots*svgCell + 10
}

// gangColor spreads hues by the golden angle so neighbours in submission order differ.
func gangColor(i int) string {
	h := math.Mod(float64(i)*137.508, 360)
	l := []int{42, 58, 34}[i%3]
	return fmt.Sprintf("hsl(%.0f,75%%,%d%%)", h, l)
}

func writePlacementSVG(t peerTree, aggs []peerAgg) error {
	svg := placementSVG(t, aggs)
	path := filepath.Join(framework.RepoRoot(), "bench", "results", "placement-"+t.label+".svg")
	return os.WriteFile(path, []byte(svg), 0o644)
}

func placementSVG(t peerTree, aggs []peerAgg) string {
	gangs := peerWorkload(t)
	pw, ph := t.panelSize()
	legendH := 16 * ((len(gangs) + 3) / 4)
	width := len(peerScheds)*pw + (len(peerScheds)-1)*svgPanelG
	height := ph + legendH + 70
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="4" y="14" font-size="13" font-weight="bold">Placement of one workload run per scheduler, size %s: %d nodes × %d CPU slots, rows = %s HyperNodes, grey blocks = %s HyperNodes; one colour per gang</text>`+"\n",
		html.EscapeString(t.label), t.nodes, t.peerSlots, t.tierLabels[t.rowTier], t.tierLabels[t.gapTier])
	for k, s := range peerScheds {
		if len(aggs[k].runs) == 0 {
			continue
		}
		r := aggs[k].runs[0]
		ox := k * (pw + svgPanelG)
		fmt.Fprintf(&sb, `<g transform="translate(%d,0)">`+"\n", ox)
		var leaves []string
		for _, size := range tpGangSizes {
			if v := r.leaves[size]; v[1] > 0 {
				leaves = append(leaves, fmt.Sprintf("%d:%.1f", size, float64(v[0])/float64(v[1])))
			}
		}
		fmt.Fprintf(&sb, `<text x="%d" y="32" font-size="13" font-weight="bold">%s</text>`+"\n", svgLabel, html.EscapeString(s.name))
		fmt.Fprintf(&sb, `<text x="%d" y="44">lowest tier %d/%d; %s/gang %s</text>`+"\n",
			svgLabel, r.lowest, r.gangs, t.tierLabels[1], strings.Join(leaves, " "))
		// Grey blocks: gap-tier HyperNodes.
		gs := t.span(t.gapTier)
		for g := 0; g < t.groups(t.gapTier); g++ {
			x, y := t.nodeXY(g * gs)
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="#e6e6e6"/>`+"\n", x, y, gs*svgCell, t.peerSlots*svgCell)
		}
		// Row labels.
		rs := t.span(t.rowTier) * t.rowsPer()
		for row := 0; row*rs < t.nodes; row++ {
			_, y := t.nodeXY(row * rs)
			fmt.Fprintf(&sb, `<text x="2" y="%d" font-size="9">%s</text>`+"\n", y+t.peerSlots*svgCell-8, html.EscapeString(t.hyperName(t.rowTier, row*t.rowsPer())))
		}
		// Pods: per node, from the bottom, in gang submission order.
		used := make([]int, t.nodes)
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
				x, y := t.nodeXY(n)
				c := min(counts[n], t.peerSlots-used[n])
				if c <= 0 {
					continue
				}
				top := y + (t.peerSlots-used[n]-c)*svgCell
				fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
					x, top, svgCell, c*svgCell, gangColor(gi), html.EscapeString(g.name+" on "+t.nodeName(n)))
				used[n] += c
			}
		}
		sb.WriteString("</g>\n")
	}
	// Legend: gang name (gNNN-size + h(ard)/s(oft)) and its hard limit.
	ly := ph + 24
	fmt.Fprintf(&sb, `<text x="4" y="%d" font-weight="bold">Gangs in submission order (h = hard, highestTierAllowed = the lowest tier that holds the gang; s = soft)</text>`+"\n", ly)
	colW := width / 4
	for i, g := range gangs {
		x, y := 4+(i%4)*colW, ly+8+(i/4)*16
		limit := "soft"
		if !g.soft {
			limit = fmt.Sprintf("hard, tier <= %d", g.tier)
		}
		fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s (%s)</text>`+"\n", x, y, gangColor(i), x+16, y+10, html.EscapeString(g.name), html.EscapeString(limit))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
