package label_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
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

// Equal values under different keys collide and get hashes of their paths.
func TestCollisions(t *testing.T) {
	raw := map[string]any{"networkTopologyTypes": map[string]any{"t": []any{
		map[string]any{"nodeLabel": "spine"}, map[string]any{"nodeLabel": "leaf"}, map[string]any{"nodeLabel": "kubernetes.io/hostname"},
	}}}
	got := tree(t, raw, labelled("a", "leaf", "x", "spine", "x"))
	spine, leaf := hypernode.WithHash("x", "t|spine=x"), hypernode.WithHash("x", "t|spine=x|leaf=x")
	assert.Equal(t, "2 spine "+spine+": "+leaf+"\n1 leaf "+leaf+": a\n", got)
}

// A domain is the path of its values from the top: rack r1 under block b1 and rack r1 under b2 are
// two racks (the labelling Kueue documents), named r1 with a hash of each path, stable from round
// to round; a unique value keeps its plain name.
func TestPathIdentity(t *testing.T) {
	raw := map[string]any{"networkTopologyTypes": map[string]any{"t": []any{
		map[string]any{"nodeLabel": "block"}, map[string]any{"nodeLabel": "rack"}, map[string]any{"nodeLabel": "kubernetes.io/hostname"},
	}}}
	nodes := []*corev1.Node{
		labelled("a", "rack", "r1", "block", "b1"), labelled("b", "rack", "r1", "block", "b2"),
		labelled("c", "rack", "r1", "block", "b2"), labelled("d", "rack", "r2", "block", "b2"),
	}
	r11, r21 := hypernode.WithHash("r1", "t|block=b1|rack=r1"), hypernode.WithHash("r1", "t|block=b2|rack=r1")
	want := "2 block b1: " + r11 + "\n2 block b2: " + r21 + " r2\n1 rack " + r11 + ": a\n1 rack " + r21 + ": b c\n1 rack r2: d\n"
	assert.Equal(t, want, sortLines(tree(t, raw, nodes...)))
	// The same nodes in another order give the same names.
	assert.Equal(t, want, sortLines(tree(t, raw, nodes[3], nodes[2], nodes[1], nodes[0])))
	for _, name := range []string{r11, r21} {
		assert.Regexp(t, `^r1-[0-9a-f]{6}$`, name)
	}
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.SliceStable(lines, func(i, j int) bool {
		return lines[i][0] > lines[j][0] || lines[i][0] == lines[j][0] && lines[i] < lines[j]
	})
	return strings.Join(lines, "\n") + "\n"
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
		"overlap":     {map[string]any{"presets": []any{"nvidia-topograph", "nvidia-gpu-clique"}}, "nvidia-gpu-clique and nvidia-topograph both read nvidia.com/gpu.clique"},
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
