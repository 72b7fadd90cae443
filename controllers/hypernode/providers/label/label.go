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
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
)

// Source is this provider's source name.
const Source = "label"

// maxTypeNameLen is Volcano's limit on a topology type's name.
const maxTypeNameLen = 20

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

// TopologyType is one parsed type: its tiers, tier 1 (nearest the node) first.
type TopologyType struct {
	Name  string
	Tiers []Tier
}

// Tier is one tier of a topology type.
type Tier struct {
	// Keys are the node label keys read for this tier: the first one a node carries gives its
	// value. Keys[0] is the tier's identity; the others are alternatives of the same meaning (a
	// GPU feature discovery clique for Topograph's accelerator domain).
	Keys []string
	// Deprecated are older keys of the same convention, read after Keys; a node read through one
	// of them is counted for the provider's warning.
	Deprecated []string
	// Name is the tier's tierName.
	Name string
	// Optional tiers are skipped on a node that lacks them (an accelerator tier on a cluster where
	// only some nodes have NVLink domains); a node that lacks a required tier stops there.
	Optional bool
}

// Key is the tier's identity key.
func (t Tier) Key() string { return t.Keys[0] }

// Provider builds the label source's tree.
type Provider struct {
	*hypernode.Runner
	types []TopologyType
	deps  hypernode.Deps

	mu        sync.Mutex
	fallbacks int // nodes read through a fallback key in the last round, for the warning
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
	p := &Provider{types: types, deps: deps}
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
		for _, tier := range t.Tiers {
			for _, k := range append(tier.Keys[:len(tier.Keys):len(tier.Keys)], tier.Deprecated...) {
				if _, ok := n.Labels[k]; ok {
					return true
				}
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
		tiers := make([]Tier, 0, len(entries)-1)
		for i := len(entries) - 2; i >= 0; i-- {
			tiers = append(tiers, Tier{Keys: []string{entries[i]}, Name: tierName(entries[i])})
		}
		for _, other := range c.Presets {
			if other >= name || Presets[other] == nil {
				continue
			}
			if k := sharedKey(tiers, Presets[other]); k != "" {
				errs = append(errs, fmt.Errorf("config.presets: %s and %s both read %s, so its domains would be built twice; keep one of them", other, name, k))
			}
		}
		out = append(out, TopologyType{Name: name, Tiers: tiers})
	}
	for name, list := range c.NetworkTopologyTypes {
		keys := make([]string, len(list))
		for i, l := range list {
			keys[i] = l.NodeLabel
		}
		add("config.networkTopologyTypes", name, keys)
	}
	for _, name := range c.Presets {
		tiers, ok := Presets[name]
		if !ok {
			errs = append(errs, fmt.Errorf("config.presets: unknown preset %q; known presets are %s", name, strings.Join(presetNames(), ", ")))
			continue
		}
		if _, clash := c.NetworkTopologyTypes[name]; clash {
			errs = append(errs, fmt.Errorf("config.presets: %q is also a networkTopologyTypes entry; rename the entry", name))
			continue
		}
		for _, other := range c.Presets {
			if other >= name || Presets[other] == nil {
				continue
			}
			if k := sharedKey(tiers, Presets[other]); k != "" {
				errs = append(errs, fmt.Errorf("config.presets: %s and %s both read %s, so its domains would be built twice; keep one of them", other, name, k))
			}
		}
		out = append(out, TopologyType{Name: name, Tiers: tiers})
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("config: name at least one topology type in networkTopologyTypes or presets"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// sharedKey returns a label key both tier lists read, or "".
func sharedKey(a, b []Tier) string {
	keys := map[string]bool{}
	for _, t := range a {
		for _, k := range append(t.Keys[:len(t.Keys):len(t.Keys)], t.Deprecated...) {
			keys[k] = true
		}
	}
	for _, t := range b {
		for _, k := range append(t.Keys[:len(t.Keys):len(t.Keys)], t.Deprecated...) {
			if keys[k] {
				return k
			}
		}
	}
	return ""
}

func presetNames() []string {
	out := make([]string, 0, len(Presets))
	for n := range Presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Discover implements hypernode.Discover: one group per domain, a domain being the path of label
// values from the top tier down to it (see GroupNodes).
func (p *Provider) Discover() ([]hypernode.Group, error) {
	if p.deps.NodesSynced != nil && !p.deps.NodesSynced() {
		return nil, errors.New("the Node informer has not synced yet")
	}
	nodes, err := p.deps.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	groups, fallbacks := groupNodes(p.types, nodes)
	p.mu.Lock()
	changed := fallbacks != p.fallbacks
	p.fallbacks = fallbacks
	p.mu.Unlock()
	if changed && fallbacks > 0 {
		p.deps.Log.Info("WARNING: nodes carry only older label keys of a preset's convention (e.g. Topograph's pre-1.0 network.topology.nvidia.com/*); they are read, but relabel them with the current keys (docs/discovery.md, Presets)",
			"nodes", fallbacks)
	}
	return groups, nil
}

// GroupNodes is Discover on a given list of Nodes.
//
// A domain is identified by the path of its values from the top tier down (as Kueue's topology
// does), so a rack number that repeats under two blocks is two racks. Its HyperNode's name is its
// value made DNS-1123; names that repeat get a short hash of the path (hypernode.Build), so they
// stay stable. Each node walks its type's tiers from the bottom: an absent required tier ends its
// chain, an absent optional tier is skipped.
func GroupNodes(types []TopologyType, nodes []*corev1.Node) ([]hypernode.Group, error) {
	groups, _ := groupNodes(types, nodes)
	return groups, nil
}

func groupNodes(types []TopologyType, nodes []*corev1.Node) ([]hypernode.Group, int) {
	type step struct {
		tier  int
		value string
	}
	byID := map[string]*hypernode.Group{}
	children := map[string]map[string]bool{}
	var order []string
	fallbackNodes := map[string]bool{}
	for _, t := range types {
		chains := make([][]step, len(nodes))
		used := make([]bool, len(t.Tiers))
		for ni, n := range nodes {
			var chain []step // bottom-up
			for i, tier := range t.Tiers {
				value, k := "", -1
				for j, key := range append(tier.Keys[:len(tier.Keys):len(tier.Keys)], tier.Deprecated...) {
					if v := n.Labels[key]; v != "" {
						value, k = v, j
						break
					}
				}
				if k < 0 {
					if tier.Optional {
						continue
					}
					break
				}
				if k >= len(tier.Keys) {
					fallbackNodes[n.Name] = true
				}
				used[i] = true
				chain = append(chain, step{i, value})
			}
			chains[ni] = chain
		}
		// Tier numbers count the tiers some node carries, so a cluster without NVLink domains
		// still has its leaves at tier 1.
		number := make([]int, len(t.Tiers))
		next := 1
		for i := range t.Tiers {
			if used[i] {
				number[i] = next
				next++
			}
		}
		for ni, n := range nodes {
			chain := chains[ni]
			if len(chain) == 0 {
				continue
			}
			// Build the path IDs from the top down.
			id := t.Name
			ids := make([]string, len(chain))
			for c := len(chain) - 1; c >= 0; c-- {
				st := chain[c]
				id += "|" + t.Tiers[st.tier].Key() + "=" + st.value
				ids[c] = id
				if _, ok := byID[id]; !ok {
					byID[id] = &hypernode.Group{ID: id, NameHint: st.value, Tier: number[st.tier], TierName: t.Tiers[st.tier].Name}
					children[id] = map[string]bool{}
					order = append(order, id)
				}
			}
			byID[ids[0]].Nodes = append(byID[ids[0]].Nodes, n.Name)
			for c := 1; c < len(ids); c++ {
				if !children[ids[c]][ids[c-1]] {
					children[ids[c]][ids[c-1]] = true
					byID[ids[c]].Children = append(byID[ids[c]].Children, ids[c-1])
				}
			}
		}
	}
	out := make([]hypernode.Group, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, len(fallbackNodes)
}

// tierName is the label key's name part: network.topology.nvidia.com/leaf → leaf.
func tierName(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		key = key[i+1:]
	}
	return hypernode.CleanName(key)
}
