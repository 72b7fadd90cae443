// Package label is the discovery provider that builds HyperNodes from node labels, in the format of
// Volcano's label discovery source: each topology type lists node label keys from the top tier down
// to the node's own (kubernetes.io/hostname), and nodes with equal values share a HyperNode.
package label

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
)

// Source is this provider's source name.
const Source = "label"

// maxTypeNameLen is Volcano's limit on a topology type's name.
const maxTypeNameLen = 20

// Presets are built-in topology types, named in config.presets.
var Presets = map[string][]string{
	// NVIDIA Topograph's node labels: core, spine and leaf switch of each node.
	"nvidia-topograph": {
		"network.topology.nvidia.com/core",
		"network.topology.nvidia.com/spine",
		"network.topology.nvidia.com/leaf",
		corev1.LabelHostname,
	},
	// The well-known cloud labels: region above zone.
	"kubernetes-zones": {corev1.LabelTopologyRegion, corev1.LabelTopologyZone, corev1.LabelHostname},
}

// Config is the provider's config block.
type Config struct {
	// NetworkTopologyTypes is Volcano's field: type name → label keys, top tier first, the node's
	// own label last.
	NetworkTopologyTypes map[string][]NodeLabel `json:"networkTopologyTypes,omitempty"`
	// Presets adds built-in types by name (hyperbatch's addition; Volcano ignores nothing here
	// because it never sees it).
	Presets []string `json:"presets,omitempty"`
}

// NodeLabel is one entry of a type's list.
type NodeLabel struct {
	NodeLabel string `json:"nodeLabel"`
}

// TopologyType is one parsed type: its tier label keys, tier 1 first.
type TopologyType struct {
	Name string
	Keys []string
}

// Provider builds the label source's tree.
type Provider struct {
	*hypernode.Runner
	types []TopologyType
	deps  hypernode.Deps

	mu       sync.Mutex
	reported map[string]string // node → the conflict last reported on it
}

// NewProvider builds the provider from its config entry.
func NewProvider(src config.Source, deps hypernode.Deps) (*Provider, error) {
	types, err := ParseConfig(src.Config)
	if err != nil {
		return nil, err
	}
	if deps.Nodes == nil {
		return nil, errors.New("the label source needs a Node lister")
	}
	p := &Provider{types: types, deps: deps, reported: map[string]string{}}
	p.Runner = hypernode.NewRunner(Source, src.Period(), p.Discover, deps.Log)
	if deps.OnNodeChange != nil {
		deps.OnNodeChange(func(old, cur *corev1.Node) {
			if p.relevant(old) || p.relevant(cur) {
				p.Trigger()
			}
		})
	}
	return p, nil
}

// relevant reports whether n carries any tier label of this provider.
func (p *Provider) relevant(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, t := range p.types {
		for _, k := range t.Keys {
			if _, ok := n.Labels[k]; ok {
				return true
			}
		}
	}
	return false
}

// ParseConfig checks the config block and returns the topology types, sorted by name.
func ParseConfig(raw map[string]any) ([]TopologyType, error) {
	var c Config
	if err := config.DecodeStrict(raw, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var errs []error
	var out []TopologyType
	add := func(field, name string, entries []string) {
		if len(name) > maxTypeNameLen {
			errs = append(errs, fmt.Errorf("%s: type name %q is longer than %d characters", field, name, maxTypeNameLen))
			return
		}
		if len(entries) < 2 {
			errs = append(errs, fmt.Errorf("%s.%s: list at least one tier label and, last, the node's own label (kubernetes.io/hostname)", field, name))
			return
		}
		seen := map[string]bool{}
		for i, k := range entries {
			if k == "" {
				errs = append(errs, fmt.Errorf("%s.%s[%d].nodeLabel is empty", field, name, i))
				return
			}
			if seen[k] {
				errs = append(errs, fmt.Errorf("%s.%s: label %q is listed twice", field, name, k))
				return
			}
			seen[k] = true
		}
		// Drop the last (node) entry, then turn top-first into tier-1-first.
		keys := make([]string, 0, len(entries)-1)
		for i := len(entries) - 2; i >= 0; i-- {
			keys = append(keys, entries[i])
		}
		out = append(out, TopologyType{Name: name, Keys: keys})
	}
	for name, list := range c.NetworkTopologyTypes {
		keys := make([]string, len(list))
		for i, l := range list {
			keys[i] = l.NodeLabel
		}
		add("config.networkTopologyTypes", name, keys)
	}
	for _, name := range c.Presets {
		keys, ok := Presets[name]
		if !ok {
			errs = append(errs, fmt.Errorf("config.presets: unknown preset %q; known presets are %s", name, strings.Join(presetNames(), ", ")))
			continue
		}
		if _, clash := c.NetworkTopologyTypes[name]; clash {
			errs = append(errs, fmt.Errorf("config.presets: %q is also a networkTopologyTypes entry; rename the entry", name))
			continue
		}
		add("config.presets", name, keys)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("config: name at least one topology type in networkTopologyTypes or presets"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

func presetNames() []string {
	out := make([]string, 0, len(Presets))
	for n := range Presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Discover implements hypernode.Discover: one group per (type, label key, value), with the nodes
// that carry it (tier 1) or the groups below it. A node's chain stops at its first missing label.
func (p *Provider) Discover() ([]hypernode.Group, error) {
	if p.deps.NodesSynced != nil && !p.deps.NodesSynced() {
		return nil, errors.New("the Node informer has not synced yet")
	}
	nodes, err := p.deps.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	groups, err := GroupNodes(p.types, nodes)
	p.report(err)
	return groups, err
}

// GroupNodes is Discover on a given list of Nodes.
func GroupNodes(types []TopologyType, nodes []*corev1.Node) ([]hypernode.Group, error) {
	type state struct {
		g         *hypernode.Group
		parent    string // ID
		parentVia string // node that set parent
		children  map[string]bool
	}
	byID := map[string]*state{}
	var order []string
	var errs []error
	conflicted := map[string]bool{}
	for _, t := range types {
		for _, n := range nodes {
			below := ""
			for i, key := range t.Keys {
				value, ok := n.Labels[key]
				if !ok || value == "" {
					break
				}
				id := t.Name + "/" + key + "=" + value
				s, ok := byID[id]
				if !ok {
					s = &state{g: &hypernode.Group{ID: id, NameHint: value, Tier: i + 1, TierName: tierName(key)}, children: map[string]bool{}}
					byID[id] = s
					order = append(order, id)
				}
				if i == 0 {
					s.g.Nodes = append(s.g.Nodes, n.Name)
				} else if !s.children[below] {
					s.children[below] = true
					s.g.Children = append(s.g.Children, below)
				}
				if below != "" {
					c := byID[below]
					switch {
					case c.parent == "":
						c.parent, c.parentVia = id, n.Name
					case c.parent != id && !conflicted[below]:
						conflicted[below] = true
						errs = append(errs, &ConflictError{Type: t.Name, Child: below, Parent: c.parent, ParentNode: c.parentVia, Other: id, OtherNode: n.Name})
					}
				}
				below = id
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make([]hypernode.Group, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id].g)
	}
	return out, nil
}

// ConflictError reports one HyperNode whose nodes name two different parents.
type ConflictError struct {
	Type, Child        string
	Parent, ParentNode string
	Other, OtherNode   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("type %s: %s sits under %s on node %s but under %s on node %s; fix the node labels",
		e.Type, e.Child, e.Parent, e.ParentNode, e.Other, e.OtherNode)
}

// ConflictReason is the reason of the Warning Event a Node gets when its labels conflict.
const ConflictReason = "HyperNodeLabelConflict"

// report posts one Warning Event per conflict on the node that disagrees with the first one seen,
// once per distinct message (a failed round is retried; the same Event again would only feed the
// recorder's spam filter).
func (p *Provider) report(err error) {
	if p.deps.Events == nil {
		return
	}
	seen := map[string]bool{}
	var errs interface{ Unwrap() []error }
	list := []error{err}
	if errors.As(err, &errs) {
		list = errs.Unwrap()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range list {
		var c *ConflictError
		if !errors.As(e, &c) {
			continue
		}
		msg := c.Error()
		seen[c.OtherNode] = true
		if p.reported[c.OtherNode] == msg {
			continue
		}
		p.reported[c.OtherNode] = msg
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.OtherNode, UID: types.UID(c.OtherNode)}}
		if n, err := p.deps.Nodes.Get(c.OtherNode); err == nil {
			node = n
		}
		p.deps.Events.Event(node, corev1.EventTypeWarning, ConflictReason, msg)
	}
	for n := range p.reported {
		if !seen[n] {
			delete(p.reported, n)
		}
	}
}

// tierName is the label key's name part: network.topology.nvidia.com/leaf → leaf.
func tierName(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		key = key[i+1:]
	}
	return hypernode.CleanName(key)
}
