// Package topology is `kubectl hyperbatch topology`: the HyperNode tree as the scheduler resolves
// it (scheduler-plugin/topology's own cache, fed the cluster's HyperNodes and Nodes), with per
// domain its nodes, allocatable and free accelerators and CPU, the gangs placed inside and the
// discovery source that owns it; as a terminal tree or an SVG picture (internal/placementsvg, the
// look of bench/results/placement-*.svg). Free capacity counts only the nodes the pods may use: a
// node with a NoSchedule or NoExecute taint they do not tolerate (or cordoned) is not free for
// them (for --gang, the gang's pods' tolerations; otherwise a pod without tolerations). --gang
// highlights where a gang sits or, for a gang that waits, the domain the scheduler reported as its
// best candidate (the hyperbatch.dev/placement annotation, what `why` shows).
package topology

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/internal/placementsvg"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/topology"
)

// Kind is the report's kind in its JSON and YAML forms.
const Kind = "TopologyReport"

// Accelerator is the resource counted as accelerators.
const Accelerator corev1.ResourceName = "nvidia.com/gpu"

// NoSource is the Source of a HyperNode no discovery source owns (written by hand or a tool).
const NoSource = "none (not discovered)"

// Report is the command's result.
type Report struct {
	metav1.TypeMeta `json:",inline"`
	Accelerator     string `json:"accelerator"`
	// Domains are the HyperNodes, depth first from the top of each tree, children by name.
	Domains []Domain `json:"domains"`
	// Outside are the nodes no HyperNode contains.
	Outside []string `json:"outside"`
	Gangs   []Gang   `json:"gangs"`
	// Invalid is why the HyperNodes do not form a tree the scheduler can use ("" when they do);
	// Warnings are members that select nothing.
	Invalid  string   `json:"invalid,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Highlight is the --gang answer.
	Highlight *Highlight `json:"highlight,omitempty"`
	// TolerationsOf says whose tolerations decide which nodes are free: the --gang gang's pods, or
	// "a pod without tolerations".
	TolerationsOf string `json:"tolerationsOf"`
	// Untolerated are the taints that keep those pods off nodes; such nodes count as allocatable,
	// not free.
	Untolerated []gangcontract.UntoleratedTaint `json:"untolerated,omitempty"`

	nodes map[string]*nodeUse
}

// Domain is one HyperNode.
type Domain struct {
	Name     string   `json:"name"`
	Tier     int      `json:"tier"`
	TierName string   `json:"tierName,omitempty"`
	Parent   string   `json:"parent,omitempty"`
	Depth    int      `json:"depth"`
	Source   string   `json:"source"`
	Nodes    []string `json:"nodes"`
	// Accelerators and CPU millicores: allocatable and free (allocatable less the requests of the
	// pods bound there that have not finished, on the nodes whose taints the pods tolerate).
	AcceleratorsAllocatable int64 `json:"acceleratorsAllocatable"`
	AcceleratorsFree        int64 `json:"acceleratorsFree"`
	CPUAllocatableMilli     int64 `json:"cpuAllocatableMilli"`
	CPUFreeMilli            int64 `json:"cpuFreeMilli"`
	// UntoleratedNodes count the nodes whose taints (or cordon) keep the pods off: none of their
	// capacity is free.
	UntoleratedNodes int `json:"untoleratedNodes,omitempty"`
	// Gangs are the gangs whose placed pods this is the lowest HyperNode holding.
	Gangs     []string `json:"gangs"`
	Highlight bool     `json:"highlight,omitempty"`
}

// Gang is one PodGroup and where its pods are.
type Gang struct {
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	MinMember int32  `json:"minMember"`
	Placed    int    `json:"placed"`
	// Domain is the lowest HyperNode holding every placed pod ("" when none is placed;
	// topology.RootName when they span trees or nodes outside every HyperNode).
	Domain string         `json:"domain,omitempty"`
	Nodes  map[string]int `json:"nodes,omitempty"`
}

// Highlight says where --gang sits, or the domain its scheduler reported as the best candidate.
type Highlight struct {
	Gang   string `json:"gang"`
	Domain string `json:"domain"`
	// Placed: the gang's pods are there. Otherwise Domain is where the scheduler says it would fit
	// best ("" when the scheduler has not said).
	Placed bool   `json:"placed"`
	Note   string `json:"note"`
}

type nodeUse struct {
	accAlloc, accFree, cpuAlloc, cpuFree int64
	// untolerated: the pods may not use the node (taints, cordon).
	untolerated bool
	// cells are the accelerator cells by gang index, in the order pods were seen.
	pods []cell
}

type cell struct {
	gang  string
	count int64
}

// DeepCopyObject implements runtime.Object.
func (r *Report) DeepCopyObject() runtime.Object { return output.DeepCopy(r) }

// Options are the command's choices.
type Options struct {
	// Gang is "namespace/name" of a PodGroup to highlight; "" for none.
	Gang string
	// BestDomain, when the gang waits, is the domain to mark as its best candidate; "" to take
	// the scheduler's (the PodGroup's hyperbatch.dev/placement annotation).
	BestDomain, BestNote string
}

// GangTolerations are the tolerations of a gang's pods: those of its first pod still to place (the
// pods of one gang are usually replicas of one template), else of its first pod; ok is false when
// the gang has no pod yet.
func GangTolerations(s *snapshot.Snapshot, namespace, name string) ([]corev1.Toleration, bool) {
	var first *corev1.Pod
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Namespace != namespace || p.Annotations[GroupNameAnnotation] != name {
			continue
		}
		if first == nil || podBefore(p, first) {
			first = p
		}
	}
	if first == nil {
		return nil, false
	}
	return first.Spec.Tolerations, true
}

// GroupNameAnnotation is the pod annotation naming its PodGroup (Volcano's key).
const GroupNameAnnotation = schedulingv1beta1.KubeGroupNameAnnotationKey

// Build computes the report from HyperNodes, Nodes, Pods and PodGroups.
func Build(s *snapshot.Snapshot, o Options) *Report {
	r := &Report{TypeMeta: output.Meta(Kind), Accelerator: string(Accelerator), Domains: []Domain{}, Outside: []string{}, Gangs: []Gang{},
		nodes: map[string]*nodeUse{}}
	c := topology.NewCache()
	r.TolerationsOf = "a pod without tolerations"
	var tolerations []corev1.Toleration
	if o.Gang != "" {
		ns, name, _ := strings.Cut(o.Gang, "/")
		if t, ok := GangTolerations(s, ns, name); ok {
			tolerations, r.TolerationsOf = t, "the pods of "+o.Gang
		} else {
			r.TolerationsOf = "a pod without tolerations (" + o.Gang + " has no pods yet)"
		}
	}
	nodePtrs := make([]*corev1.Node, len(s.Nodes))
	for i := range s.Nodes {
		nodePtrs[i] = &s.Nodes[i]
	}
	r.Untolerated = gangcontract.UntoleratedTaints(nodePtrs, tolerations, false)
	untolerated := map[string]bool{}
	for _, u := range r.Untolerated {
		for _, n := range u.Nodes {
			untolerated[n] = true
		}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		c.AddOrUpdateNode(n)
		a := n.Status.Allocatable[Accelerator]
		cpu := n.Status.Allocatable[corev1.ResourceCPU]
		r.nodes[n.Name] = &nodeUse{accAlloc: a.Value(), accFree: a.Value(), cpuAlloc: cpu.MilliValue(), cpuFree: cpu.MilliValue(), untolerated: untolerated[n.Name]}
	}
	sources := map[string]string{}
	for i := range s.HyperNodes {
		hn := &s.HyperNodes[i]
		c.AddOrUpdateHyperNode(hn)
		src := hn.Labels[hbv1.HyperNodeSourceLabel]
		if src == "" {
			src = NoSource
		}
		sources[hn.Name] = src
	}
	// Pods bound and not finished use their node's capacity; gang members are remembered per gang.
	gangPods := map[string]map[string]int{}
	pods := append([]corev1.Pod(nil), s.Pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name })
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := r.nodes[p.Spec.NodeName]
		if u == nil {
			continue
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		acc, cpu := req[Accelerator], req[corev1.ResourceCPU]
		u.accFree -= acc.Value()
		u.cpuFree -= cpu.MilliValue()
		gang := ""
		if g := p.Annotations[GroupNameAnnotation]; g != "" {
			gang = p.Namespace + "/" + g
			if gangPods[gang] == nil {
				gangPods[gang] = map[string]int{}
			}
			gangPods[gang][p.Spec.NodeName]++
		}
		u.pods = append(u.pods, cell{gang: gang, count: acc.Value()})
	}
	c.Read(func(t topology.Tree) {
		r.Invalid = t.Invalid()
		r.Warnings = t.Warnings()
		gangAt := map[string][]string{}
		pgs := append([]schedulingv1beta1.PodGroup(nil), s.PodGroups...)
		sort.Slice(pgs, func(i, j int) bool { return key(&pgs[i]) < key(&pgs[j]) })
		for i := range pgs {
			pg := &pgs[i]
			g := Gang{Name: key(pg), Phase: string(pg.Status.Phase), MinMember: pg.Spec.MinMember, Nodes: gangPods[key(pg)]}
			var nodes []string
			for n, k := range g.Nodes {
				nodes = append(nodes, n)
				g.Placed += k
			}
			sort.Strings(nodes)
			if lca := t.LCA(nodes); lca != nil {
				g.Domain = lca.Name
				if lca.IsRoot() {
					g.Domain = topology.RootName
				}
				gangAt[g.Domain] = append(gangAt[g.Domain], g.Name)
			}
			r.Gangs = append(r.Gangs, g)
		}
		if t.Invalid() != "" {
			return
		}
		var walk func(h *topology.HyperNode, depth int)
		walk = func(h *topology.HyperNode, depth int) {
			d := Domain{Name: h.Name, Tier: h.Tier, TierName: h.TierName, Depth: depth, Source: sources[h.Name], Nodes: h.NodeNames(), Gangs: gangAt[h.Name]}
			if d.Gangs == nil {
				d.Gangs = []string{}
			}
			if h.Parent != nil && !h.Parent.IsRoot() {
				d.Parent = h.Parent.Name
			}
			for _, n := range d.Nodes {
				if u := r.nodes[n]; u != nil {
					d.AcceleratorsAllocatable += u.accAlloc
					d.CPUAllocatableMilli += u.cpuAlloc
					if u.untolerated {
						d.UntoleratedNodes++
						continue
					}
					d.AcceleratorsFree += u.accFree
					d.CPUFreeMilli += u.cpuFree
				}
			}
			r.Domains = append(r.Domains, d)
			kids := append([]*topology.HyperNode(nil), h.Children...)
			sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
			for _, k := range kids {
				walk(k, depth+1)
			}
		}
		tops := append([]*topology.HyperNode(nil), t.Root().Children...)
		sort.Slice(tops, func(i, j int) bool { return tops[i].Name < tops[j].Name })
		for _, h := range tops {
			walk(h, 0)
		}
		for i := range s.Nodes {
			if len(t.Containers(s.Nodes[i].Name)) == 0 {
				r.Outside = append(r.Outside, s.Nodes[i].Name)
			}
		}
		sort.Strings(r.Outside)
	})
	if o.Gang != "" {
		if o.BestDomain == "" {
			o.BestDomain, o.BestNote = SchedulerCandidate(s, o.Gang)
		}
		r.highlight(o)
	}
	return r
}

// podBefore orders a gang's pods for GangTolerations: unbound pods first, then by name.
func podBefore(a, b *corev1.Pod) bool {
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	return a.Name < b.Name
}

// SchedulerCandidate is the domain hyperbatch-scheduler reported as the best candidate of a waiting
// gang (the best domain of the lowest allowed tier in its hyperbatch.dev/placement annotation), with
// a note in numbers; "" when it has reported none.
func SchedulerCandidate(s *snapshot.Snapshot, gang string) (string, string) {
	ns, name, _ := strings.Cut(gang, "/")
	pg := s.PodGroup(ns, name)
	if pg == nil {
		return "", ""
	}
	v, ok := pg.Annotations[gangcontract.PlacementAnnotation]
	if !ok {
		return "", ""
	}
	p, err := gangcontract.ParsePlacement(v)
	if err != nil {
		return "", "the scheduler's placement annotation cannot be read: " + err.Error()
	}
	t := p.BestAllowed()
	if t == nil {
		return "", ""
	}
	note := fmt.Sprintf("not placed; the scheduler's best candidate (tier %d, at %s): room for %d of the %d pods still to place", t.Tier, p.Time, t.BestRoom, p.Need.Pods)
	if t.Binding != "" {
		note += ", bound by " + t.Binding
	}
	return t.Best, note
}

func key(pg *schedulingv1beta1.PodGroup) string { return pg.Namespace + "/" + pg.Name }

func (r *Report) highlight(o Options) {
	h := &Highlight{Gang: o.Gang}
	for _, g := range r.Gangs {
		if g.Name != o.Gang {
			continue
		}
		if g.Placed > 0 {
			h.Domain, h.Placed = g.Domain, true
			h.Note = fmt.Sprintf("%d of minMember %d pods placed, lowest HyperNode holding them: %s", g.Placed, g.MinMember, g.Domain)
		}
	}
	if !h.Placed {
		h.Domain, h.Note = o.BestDomain, o.BestNote
		if h.Note == "" {
			h.Note = "not placed, and the scheduler has not reported a candidate domain"
		}
	}
	for i := range r.Domains {
		if h.Domain != "" && r.Domains[i].Name == h.Domain {
			r.Domains[i].Highlight = true
		}
	}
	r.Highlight = h
}

// cores writes millicores as cores, one decimal when not whole.
func cores(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', 1, 64)
}

// WriteTable writes the tree, one line per HyperNode, with tree-drawing prefixes.
func (r *Report) WriteTable(w io.Writer) error {
	pw := output.Sticky(w)
	if r.Invalid != "" {
		pw.Printf("The HyperNodes do not form a usable tree (the scheduler waits): %s\n", r.Invalid)
	}
	if len(r.Domains) == 0 && r.Invalid == "" {
		pw.Println("No HyperNodes: gangs with a network topology constraint wait; others use the whole cluster.")
	}
	rows := [][]string{{"HYPERNODE", "TIER", "SOURCE", "NODES", strings.ToUpper(shortName(r.Accelerator)) + " FREE/ALLOC", "CPU FREE/ALLOC", "GANGS"}}
	for i, d := range r.Domains {
		name := treePrefix(r.Domains, i) + d.Name
		if d.Highlight {
			name += " <=="
		}
		rows = append(rows, []string{name, strconv.Itoa(d.Tier), d.Source, strconv.Itoa(len(d.Nodes)),
			fmt.Sprintf("%d/%d", d.AcceleratorsFree, d.AcceleratorsAllocatable), cores(d.CPUFreeMilli) + "/" + cores(d.CPUAllocatableMilli), output.List(d.Gangs)})
	}
	if len(r.Domains) > 0 {
		if err := output.Tab(w, rows); err != nil {
			return err
		}
	}
	if len(r.Untolerated) > 0 {
		pw.Printf("\nNot counted as free: nodes with taints %s do not tolerate:\n", r.TolerationsOf)
		for _, u := range r.Untolerated {
			pw.Printf("  %s on %d node(s): %s; to admit them, %s\n", u, len(u.Nodes), output.List(u.Nodes), u.Remedy())
		}
	}
	if len(r.Outside) > 0 {
		pw.Printf("\nNodes outside every HyperNode (%d): %s\n", len(r.Outside), output.List(r.Outside))
	}
	var spanning []string
	for _, g := range r.Gangs {
		if g.Domain == topology.RootName {
			spanning = append(spanning, g.Name)
		}
	}
	if len(spanning) > 0 {
		pw.Printf("\nGangs spanning more than one tree or nodes outside the tree: %s\n", output.List(spanning))
	}
	for _, s := range r.Warnings {
		pw.Printf("warning: %s\n", s)
	}
	if h := r.Highlight; h != nil {
		where := h.Domain
		if where == "" {
			where = "nowhere yet"
		}
		verb := "would fit best in"
		if h.Placed {
			verb = "sits in"
		}
		pw.Printf("\n%s %s %s (marked <==): %s\n", h.Gang, verb, where, h.Note)
	}
	return nil
}

func shortName(res string) string {
	if i := strings.LastIndexByte(res, '/'); i >= 0 {
		return res[i+1:]
	}
	return res
}

// treePrefix draws the branch lines in front of domain i.
func treePrefix(ds []Domain, i int) string {
	d := ds[i]
	if d.Depth == 0 {
		return ""
	}
	var sb strings.Builder
	for level := 1; level <= d.Depth; level++ {
		last := isLastAt(ds, i, level)
		switch {
		case level == d.Depth && last:
			sb.WriteString("└─ ")
		case level == d.Depth:
			sb.WriteString("├─ ")
		case last:
			sb.WriteString("   ")
		default:
			sb.WriteString("│  ")
		}
	}
	return sb.String()
}

// isLastAt reports whether the ancestor of ds[i] at depth level (ds[i] itself at its own depth) is
// the last child of its parent: no later entry at that depth before the depth drops below it.
func isLastAt(ds []Domain, i, level int) bool {
	for j := i + 1; j < len(ds); j++ {
		if ds[j].Depth < level {
			return true
		}
		if ds[j].Depth == level {
			return false
		}
	}
	return true
}

// Picture is the report as an SVG picture: one row per HyperNode of the tier above the leaves (the
// leaves are the grey blocks), one cell per accelerator, pods coloured by gang; the highlighted
// domain's leaves are outlined.
func (r *Report) Picture() placementsvg.Picture {
	slots := int64(1)
	for _, u := range r.nodes {
		slots = max(slots, u.accAlloc)
	}
	pic := placementsvg.Picture{
		Title: fmt.Sprintf("HyperNode tree: %d HyperNodes, %d nodes × %d %s cells, rows = HyperNodes above the leaves, grey blocks = leaf HyperNodes; one colour per gang",
			len(r.Domains), len(r.nodes), slots, r.Accelerator),
		Slots:       int(slots),
		NameGroups:  true,
		MinWidth:    900,
		LegendTitle: "Gangs (phase; placed pods / minMember; lowest HyperNode holding them)",
	}
	gangIdx := map[string]int{}
	for i, g := range r.Gangs {
		gangIdx[g.Name] = i
		where := g.Domain
		if where == "" {
			where = "not placed"
		}
		pic.Gangs = append(pic.Gangs, placementsvg.Gang{Name: g.Name, Note: fmt.Sprintf("%s; %d/%d; %s", g.Phase, g.Placed, g.MinMember, where)})
	}
	highlighted := map[string]bool{}
	if r.Highlight != nil && r.Highlight.Domain != "" {
		for _, d := range r.Domains {
			if d.Name == r.Highlight.Domain {
				for _, n := range d.Nodes {
					highlighted[n] = true
				}
			}
		}
	}
	leafGroup := func(d Domain) placementsvg.Group {
		g := placementsvg.Group{Name: d.Name, Nodes: d.Nodes}
		g.Highlight = len(d.Nodes) > 0 && highlighted[d.Nodes[0]]
		return g
	}
	children := map[string][]Domain{}
	for _, d := range r.Domains {
		children[d.Parent] = append(children[d.Parent], d)
	}
	for _, d := range r.Domains {
		kids := children[d.Name]
		if len(kids) == 0 || len(children[kids[0].Name]) > 0 {
			if len(kids) == 0 && d.Parent == "" { // a lone leaf at the top
				pic.Rows = append(pic.Rows, placementsvg.Row{Label: d.Name, Segments: []placementsvg.Segment{{Groups: []placementsvg.Group{leafGroup(d)}}}})
			}
			continue
		}
		var seg placementsvg.Segment
		for _, k := range kids {
			seg.Groups = append(seg.Groups, leafGroup(k))
		}
		pic.Rows = append(pic.Rows, placementsvg.Row{Label: d.Name, Segments: []placementsvg.Segment{seg}})
	}
	if len(r.Outside) > 0 {
		pic.Rows = append(pic.Rows, placementsvg.Row{Label: "(no HyperNode)", Segments: []placementsvg.Segment{{Groups: []placementsvg.Group{{Name: "(no HyperNode)", Nodes: r.Outside}}}}})
	}
	panel := placementsvg.Panel{Name: "cluster", Subtitle: fmt.Sprintf("%d gangs; free %s: %d of %d", len(r.Gangs), r.Accelerator, r.freeAcc(), r.allocAcc())}
	if r.Highlight != nil {
		panel.Subtitle += "; outlined: " + r.Highlight.Gang
	}
	var names []string
	for n := range r.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, c := range r.nodes[n].pods {
			gi, ok := gangIdx[c.gang]
			if !ok || c.count <= 0 {
				continue
			}
			panel.Pods = append(panel.Pods, placementsvg.Pods{Gang: gi, Node: n, Count: int(c.count)})
		}
	}
	pic.Panels = []placementsvg.Panel{panel}
	return pic
}

func (r *Report) freeAcc() (n int64) {
	for _, u := range r.nodes {
		if u.untolerated {
			continue
		}
		n += u.accFree
	}
	return n
}

func (r *Report) allocAcc() (n int64) {
	for _, u := range r.nodes {
		n += u.accAlloc
	}
	return n
}
