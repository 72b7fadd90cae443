package label_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/hypernodetest"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
)

func labelled(name string, kv ...string) *corev1.Node {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return hypernodetest.Nodes(l, name)[0]
}

func tree(t *testing.T, raw map[string]any, nodes ...*corev1.Node) string {
	t.Helper()
	types, err := label.ParseConfig(raw)
	require.NoError(t, err)
	groups, err := label.GroupNodes(types, nodes)
	require.NoError(t, err)
	hns, err := hypernode.Build(label.Source, groups, nil)
	require.NoError(t, err)
	return hypernodetest.Render(hns)
}

// Volcano's own documented example: tiers from the bottom label up, nodes by name.
func TestVolcanoFormat(t *testing.T) {
	raw := map[string]any{"networkTopologyTypes": map[string]any{"topologyA3": []any{
		map[string]any{"nodeLabel": "volcano.sh/hypercluster"},
		map[string]any{"nodeLabel": "volcano.sh/hypernode"},
		map[string]any{"nodeLabel": "kubernetes.io/hostname"},
	}}}
	var nodes []*corev1.Node
	for i, hn := range []string{"s0", "s0", "s1", "s1", "s2", "s2", "s3", "s3"} {
		hc := "s4"
		if i >= 4 {
			hc = "s5"
		}
		nodes = append(nodes, labelled("node"+string(rune('0'+i)), "volcano.sh/hypernode", hn, "volcano.sh/hypercluster", hc))
	}
	nodes = append(nodes, labelled("unlabelled"))
	assert.Equal(t, `2 hypercluster s4: s0 s1
2 hypercluster s5: s2 s3
1 hypernode s0: node0 node1
1 hypernode s1: node2 node3
1 hypernode s2: node4 node5
1 hypernode s3: node6 node7
`, tree(t, raw, nodes...))
}

// The presets read NVIDIA Topograph's labels and the well-known zone and region labels.
func TestPresets(t *testing.T) {
	const (
		leaf  = "network.topology.nvidia.com/leaf"
		spine = "network.topology.nvidia.com/spine"
		core  = "network.topology.nvidia.com/core"
	)
	got := tree(t, map[string]any{"presets": []any{"nvidia-topograph"}},
		labelled("a", leaf, "sw1", spine, "sp1", core, "c1"),
		labelled("b", leaf, "sw2", spine, "sp1", core, "c1"),
		labelled("c", leaf, "sw3", spine, "sp2"), // no core label: its spine is a root
	)
	assert.Equal(t, "3 core c1: sp1\n2 spine sp1: sw1 sw2\n2 spine sp2: sw3\n1 leaf sw1: a\n1 leaf sw2: b\n1 leaf sw3: c\n", got)

	got = tree(t, map[string]any{"presets": []any{"kubernetes-zones"}},
		labelled("a", corev1.LabelTopologyZone, "eu-1a", corev1.LabelTopologyRegion, "eu-1"),
		labelled("b", corev1.LabelTopologyZone, "eu-1b", corev1.LabelTopologyRegion, "eu-1"))
	assert.Equal(t, "2 region eu-1: eu-1a eu-1b\n1 zone eu-1a: a\n1 zone eu-1b: b\n", got)
}

// Equal values under different keys collide and get hashes; a leaf seen under two spines is an
// error naming both nodes.
func TestCollisionsAndConflicts(t *testing.T) {
	raw := map[string]any{"networkTopologyTypes": map[string]any{"t": []any{
		map[string]any{"nodeLabel": "spine"}, map[string]any{"nodeLabel": "leaf"}, map[string]any{"nodeLabel": "kubernetes.io/hostname"},
	}}}
	got := tree(t, raw, labelled("a", "leaf", "x", "spine", "x"))
	assert.Equal(t, "2 spine "+hypernode.WithHash("x", "t/spine=x")+": "+hypernode.WithHash("x", "t/leaf=x")+"\n1 leaf "+hypernode.WithHash("x", "t/leaf=x")+": a\n", got)

	types, err := label.ParseConfig(raw)
	require.NoError(t, err)
	_, err = label.GroupNodes(types, []*corev1.Node{labelled("a", "leaf", "l", "spine", "s1"), labelled("b", "leaf", "l", "spine", "s2"), labelled("c", "leaf", "l", "spine", "s2")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node a")
	assert.Contains(t, err.Error(), "node b")
	assert.NotContains(t, err.Error(), "node c", "one error per conflicting HyperNode")
}

func TestConfigErrors(t *testing.T) {
	for name, c := range map[string]struct {
		raw  map[string]any
		want string
	}{
		"empty":       {map[string]any{}, "name at least one topology type"},
		"one entry":   {map[string]any{"networkTopologyTypes": map[string]any{"t": []any{map[string]any{"nodeLabel": "a"}}}}, "list at least one tier label"},
		"duplicate":   {map[string]any{"networkTopologyTypes": map[string]any{"t": []any{map[string]any{"nodeLabel": "a"}, map[string]any{"nodeLabel": "a"}}}}, `label "a" is listed twice`},
		"long name":   {map[string]any{"networkTopologyTypes": map[string]any{"a-very-long-topology-type": []any{}}}, "longer than 20"},
		"preset":      {map[string]any{"presets": []any{"nvidia"}}, `unknown preset "nvidia"`},
		"typo":        {map[string]any{"networkTopologyType": map[string]any{}}, `unknown field "networkTopologyType"`},
		"empty label": {map[string]any{"networkTopologyTypes": map[string]any{"t": []any{map[string]any{"nodeLabel": ""}, map[string]any{"nodeLabel": "h"}}}}, "t[0].nodeLabel is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := label.ParseConfig(c.raw)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// A conflict is reported as one Warning Event on the node that disagrees, once per distinct
// conflict however often the round is retried, and again when it comes back after a fix.
func TestConflictEvents(t *testing.T) {
	raw := map[string]any{"networkTopologyTypes": map[string]any{"t": []any{
		map[string]any{"nodeLabel": "spine"}, map[string]any{"nodeLabel": "leaf"}, map[string]any{"nodeLabel": "kubernetes.io/hostname"},
	}}}
	bad := []*corev1.Node{labelled("a", "leaf", "l", "spine", "s1"), labelled("b", "leaf", "l", "spine", "s2")}
	good := []*corev1.Node{labelled("a", "leaf", "l", "spine", "s1"), labelled("b", "leaf", "l", "spine", "s1")}
	rec := record.NewFakeRecorder(10)
	nodes := bad
	p, err := label.NewProvider(config.Source{Source: label.Source, Config: raw},
		hypernode.Deps{Nodes: listerFunc(func() []*corev1.Node { return nodes }), Events: rec, Log: logr.Discard()})
	require.NoError(t, err)

	for i := 0; i < 3; i++ {
		_, err = p.Discover()
		require.Error(t, err)
	}
	nodes = good
	_, err = p.Discover()
	require.NoError(t, err)
	nodes = bad
	_, err = p.Discover()
	require.Error(t, err)

	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	require.Len(t, got, 2)
	for _, e := range got {
		assert.True(t, strings.HasPrefix(e, "Warning "+label.ConflictReason+" type t: "), e)
		assert.Contains(t, e, "on node b")
	}
}

// listerFunc serves the current result of nodes.
type listerFunc func() []*corev1.Node

func (f listerFunc) List(labels.Selector) ([]*corev1.Node, error) { return f(), nil }

func (f listerFunc) Get(name string) (*corev1.Node, error) {
	for _, n := range f() {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}
