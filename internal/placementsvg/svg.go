// Package placementsvg draws where gangs sit in a HyperNode tree as an SVG picture, with the
// standard library only. The scheduler benchmark's placement pictures (bench/results/placement-*.svg)
// and `kubectl hyperbatch topology --svg` both draw through it, so they look the same.
//
// The picture is one or more panels side by side over the same layout. A row is one or more
// row-tier HyperNodes (segments, a wide gap between them); inside a segment, the HyperNodes of the
// tier below are grey blocks (groups, a small gap between them). A node is one column of Slots
// cells; its pods fill the column from the bottom, one colour per gang. A gang kept together is one
// solid block of colour; a scattered gang is confetti across the picture.
package placementsvg

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Pixel sizes of the layout.
const (
	Cell     = 4  // pixels per slot (and per node column)
	Gap      = 3  // between groups
	RowGap   = 10 // between segments of a row
	LabelW   = 70 // row label margin
	PanelGap = 30 // between panels
	TopH     = 48 // title area
)

// Picture is everything one SVG shows.
type Picture struct {
	// Title is the first line, in bold.
	Title string
	// Slots is the height of every node column, in cells.
	Slots int
	// Rows is the tree's layout, shared by every panel.
	Rows []Row
	// NameGroups gives every grey block a <title> with its HyperNode's name (a tooltip, and a name
	// tests can find).
	NameGroups bool
	// MinWidth widens a small picture (its title and legend need the room); 0 for none.
	MinWidth int
	// Panels are drawn side by side; an Empty panel keeps its place and draws nothing.
	Panels []Panel
	// LegendTitle heads the legend of Gangs; Gangs are indexed by Pods.Gang and coloured by index.
	LegendTitle string
	Gangs       []Gang
}

// Row is one line of the picture: its label (left margin) and its segments.
type Row struct {
	Label    string
	Segments []Segment
}

// Segment is one row-tier HyperNode: its groups, a small gap between them.
type Segment struct {
	Groups []Group
}

// Group is one grey block of node columns (a HyperNode of the tier below the row's); Highlight
// outlines it in red.
type Group struct {
	Name      string
	Nodes     []string
	Highlight bool
}

// Panel is one view of the layout: a heading, a subtitle and the pods placed.
type Panel struct {
	Name, Subtitle string
	Empty          bool
	// Pods are drawn in this order, each stacked on top of what its node holds already.
	Pods []Pods
}

// Pods is Count cells of gang Gang on node Node (a name of the layout).
type Pods struct {
	Gang  int
	Node  string
	Count int
}

// Gang is one legend entry, written "Name (Note)".
type Gang struct {
	Name, Note string
}

// nodePos is a node column's top-left corner within a panel.
type nodePos struct{ x, y int }

type layout struct {
	pos          map[string]nodePos
	groupsXY     []nodePos
	groups       []Group
	rowY         []int
	panelW, panH int
}

func (p *Picture) layout() layout {
	l := layout{pos: map[string]nodePos{}}
	rowH := p.Slots*Cell + Gap*2
	maxX, maxY := 0, 0
	for r, row := range p.Rows {
		y := TopH + r*rowH
		l.rowY = append(l.rowY, y)
		col, g := 0, 0
		for s, seg := range row.Segments {
			for _, grp := range seg.Groups {
				first := true
				for _, n := range grp.Nodes {
					x := LabelW + col*Cell + g*Gap + s*(RowGap-Gap)
					if first {
						l.groupsXY = append(l.groupsXY, nodePos{x, y})
						l.groups = append(l.groups, grp)
						first = false
					}
					l.pos[n] = nodePos{x, y}
					maxX, maxY = max(maxX, x), max(maxY, y)
					col++
				}
				g++
			}
		}
	}
	l.panelW, l.panH = maxX+Cell+10, maxY+p.Slots*Cell+10
	return l
}

// ColorOf is gang i's colour: hues spread by the golden angle so neighbours in order differ.
func ColorOf(i int) string {
	h := math.Mod(float64(i)*137.508, 360)
	l := []int{42, 58, 34}[i%3]
	return fmt.Sprintf("hsl(%.0f,75%%,%d%%)", h, l)
}

// SVG draws the picture. Pods on a node not in the layout, and cells above a column's Slots, are
// left out.
func (p *Picture) SVG() string {
	l := p.layout()
	pw, ph := l.panelW, l.panH
	width := max(len(p.Panels)*pw+max(len(p.Panels)-1, 0)*PanelGap, p.MinWidth)
	// Legend columns of at least 300 pixels, at most 4.
	cols := min(max(width/300, 1), 4)
	legendH := 16 * ((len(p.Gangs) + cols - 1) / cols)
	height := ph + legendH + 70
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="4" y="14" font-size="13" font-weight="bold">%s</text>`+"\n", html.EscapeString(p.Title))
	for k, panel := range p.Panels {
		if panel.Empty {
			continue
		}
		fmt.Fprintf(&sb, `<g transform="translate(%d,0)">`+"\n", k*(pw+PanelGap))
		fmt.Fprintf(&sb, `<text x="%d" y="32" font-size="13" font-weight="bold">%s</text>`+"\n", LabelW, html.EscapeString(panel.Name))
		fmt.Fprintf(&sb, `<text x="%d" y="44">%s</text>`+"\n", LabelW, html.EscapeString(panel.Subtitle))
		for i, g := range l.groups {
			xy := l.groupsXY[i]
			if p.NameGroups {
				fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="#e6e6e6"><title>%s</title></rect>`+"\n", xy.x, xy.y, len(g.Nodes)*Cell, p.Slots*Cell, html.EscapeString(g.Name))
				continue
			}
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="#e6e6e6"/>`+"\n", xy.x, xy.y, len(g.Nodes)*Cell, p.Slots*Cell)
		}
		for i, g := range l.groups {
			if g.Highlight {
				xy := l.groupsXY[i]
				fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#d00000" stroke-width="2"><title>%s</title></rect>`+"\n",
					xy.x-2, xy.y-2, len(g.Nodes)*Cell+4, p.Slots*Cell+4, html.EscapeString(g.Name))
			}
		}
		for r, row := range p.Rows {
			fmt.Fprintf(&sb, `<text x="2" y="%d" font-size="9">%s</text>`+"\n", l.rowY[r]+p.Slots*Cell-8, html.EscapeString(row.Label))
		}
		used := map[string]int{}
		for _, pods := range panel.Pods {
			xy, ok := l.pos[pods.Node]
			if !ok {
				continue
			}
			c := min(pods.Count, p.Slots-used[pods.Node])
			if c <= 0 {
				continue
			}
			top := xy.y + (p.Slots-used[pods.Node]-c)*Cell
			name := ""
			if pods.Gang >= 0 && pods.Gang < len(p.Gangs) {
				name = p.Gangs[pods.Gang].Name
			}
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				xy.x, top, Cell, c*Cell, ColorOf(pods.Gang), html.EscapeString(name+" on "+pods.Node))
			used[pods.Node] += c
		}
		sb.WriteString("</g>\n")
	}
	ly := ph + 24
	fmt.Fprintf(&sb, `<text x="4" y="%d" font-weight="bold">%s</text>`+"\n", ly, html.EscapeString(p.LegendTitle))
	colW := width / cols
	for i, g := range p.Gangs {
		x, y := 4+(i%cols)*colW, ly+8+(i/cols)*16
		fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s (%s)</text>`+"\n", x, y, ColorOf(i), x+16, y+10, html.EscapeString(g.Name), html.EscapeString(g.Note))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
