package karmadainterpreter

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"
)

func load(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(b, &u.Object))
	return u
}

// retain runs the script as karmada-controller-manager does: in gopher-lua, the objects handed over
// and taken back as JSON through gopher-json (Karmada's luavm; its package cannot be imported here:
// it is built against an older Kubernetes).
func retain(t *testing.T, desired, observed *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	l := lua.NewState()
	defer l.Close()
	require.NoError(t, l.DoString(VolcanoJobRetention().Spec.Customizations.Retention.LuaScript))
	toLua := func(u *unstructured.Unstructured) lua.LValue {
		b, err := json.Marshal(u.Object)
		require.NoError(t, err)
		v, err := luajson.Decode(l, b)
		require.NoError(t, err)
		return v
	}
	require.NoError(t, l.CallByParam(lua.P{Fn: l.GetGlobal("Retain"), NRet: 1, Protect: true}, toLua(desired), toLua(observed)))
	b, err := luajson.Encode(l.Get(-1))
	require.NoError(t, err)
	out := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal(b, &out.Object))
	return out
}

// spec is the object's spec through JSON (numbers as float64 whatever their source).
func spec(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	b, err := json.Marshal(u.Object["spec"])
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(b, &s))
	require.NotNil(t, s)
	return s
}

// The captured pair: the template on the plane lacks what Volcano's webhook added in the member
// (each task's maxRetry and minAvailable). Retained, the desired spec is the member's, so Karmada
// finds nothing to update and never sends Volcano a spec change it refuses; the template's
// metadata (Karmada's and hyperbatch's labels and annotations) is left alone.
func TestRetainKeepsTheMembersDefaults(t *testing.T) {
	tmpl, member := load(t, "testdata/template-job.yaml"), load(t, "testdata/member-job.yaml")
	require.NotEqual(t, spec(t, member), spec(t, tmpl), "the captures differ by Volcano's defaults")
	got := retain(t, tmpl, member)
	assert.Equal(t, spec(t, member), spec(t, got))
	assert.Equal(t, tmpl.GetLabels(), got.GetLabels())
	assert.Equal(t, tmpl.GetAnnotations(), got.GetAnnotations())
}

// The fields Volcano lets an update change come from the template; everything else stays the
// member's.
func TestRetainPassesWhatVolcanoAllowsToChange(t *testing.T) {
	tmpl, member := load(t, "testdata/template-job.yaml"), load(t, "testdata/member-job.yaml")
	tasks, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "tasks")
	task := tasks[0].(map[string]any)
	task["replicas"], task["minAvailable"] = int64(3), int64(2)
	require.NoError(t, unstructured.SetNestedSlice(tmpl.Object, tasks, "spec", "tasks"))
	require.NoError(t, unstructured.SetNestedField(tmpl.Object, int64(2), "spec", "minAvailable"))
	require.NoError(t, unstructured.SetNestedField(tmpl.Object, "high", "spec", "priorityClassName"))

	want := spec(t, member)
	want["minAvailable"], want["priorityClassName"] = float64(2), "high"
	wt := want["tasks"].([]any)[0].(map[string]any)
	wt["replicas"], wt["minAvailable"] = float64(3), float64(2)
	assert.Equal(t, want, spec(t, retain(t, tmpl, member)))
	assert.EqualValues(t, 3, wt["maxRetry"], "the member's defaulted maxRetry stays")
}

// A template with another number of tasks is no change Volcano allows: it is applied as it is, and
// Volcano's refusal shows in the Work.
func TestRetainLeavesATaskCountChangeAlone(t *testing.T) {
	tmpl, member := load(t, "testdata/template-job.yaml"), load(t, "testdata/member-job.yaml")
	tasks, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "tasks")
	second := (&unstructured.Unstructured{Object: tasks[0].(map[string]any)}).DeepCopy().Object
	second["name"] = "second"
	require.NoError(t, unstructured.SetNestedSlice(tmpl.Object, append(tasks, second), "spec", "tasks"))
	assert.Equal(t, spec(t, tmpl), spec(t, retain(t, tmpl, member)))
}
