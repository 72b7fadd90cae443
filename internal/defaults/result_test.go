package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func TestDefaultedByFormat(t *testing.T) {
	tests := []struct {
		name     string
		existing string
		add      [][2]string // source, field
		want     string
	}{
		{"fields in canonical order", "", [][2]string{{"p", FieldNetworkTopology}, {"p", FieldQueue}, {"p", FieldPriorityClassName}},
			"p/queue,priorityClassName,networkTopology"},
		{"history kept, new source appended", "old/queue", [][2]string{{"new", FieldSchedulerName}}, "old/queue;new/schedulerName"},
		{"merge into an existing source, no duplicates", "p/queue", [][2]string{{"p", FieldQueue}, {"p", FieldPropagateDeps}},
			"p/queue,propagateDeps"},
		{"tolerant parsing: blanks, bare sources, unknown fields last", " ; bare ;p/zzz, queue,,", [][2]string{{"namespace:ml", FieldQueue}},
			"bare;p/queue,zzz;namespace:ml/queue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := parseDefaultedBy(tc.existing)
			var add provenance
			for _, a := range tc.add {
				add.add(a[0], a[1])
			}
			p.merge(add)
			got := p.String()
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if again := parseDefaultedBy(got).String(); again != got {
				t.Errorf("not stable under re-parsing: %q -> %q", got, again)
			}
		})
	}
}

// TestFills checks that each Fill names its field and the source its value came from, without
// the object's defaulted-by history (the webhook's warning is built from exactly this).
func TestFills(t *testing.T) {
	pols := mustPolicies(t, teamA())
	qPath := "metadata.annotations[" + QueueNameAnnotation + "]"
	rj := func(i, rest string) string { return "spec.replicatedJobs[" + i + "].template.spec.template." + rest }

	t.Run("Pod: queue from the namespace, the rest from the policy, history not reported", func(t *testing.T) {
		p := pod(map[string]string{hbv1.DefaultedByAnnotation: "old/priorityClassName"}, nil)
		res := Pod(p, nsML, pols)
		policy := Source{Kind: SourcePolicy, Name: "team-a"}
		require.Equal(t, []Fill{
			{Path: qPath, Field: FieldQueue, Source: Source{Kind: SourceNamespace, Name: "ml"}},
			{Path: "spec.priorityClassName", Field: FieldPriorityClassName, Source: policy},
			{Path: "spec.schedulerName", Field: FieldSchedulerName, Source: policy},
			{Path: "metadata.annotations[" + NetworkTopologyModeAnnotation + "]", Field: FieldNetworkTopology, Source: policy},
			{Path: "metadata.annotations[" + NetworkTopologyHighestTierAnnotation + "]", Field: FieldNetworkTopology, Source: policy},
		}, res.Fills)
		assert.True(t, res.Filled("spec.priorityClassName"))
		assert.False(t, res.Filled("spec.priority"))
	})

	t.Run("JobSet: its own queue copied into the templates", func(t *testing.T) {
		js := jobSet(map[string]string{QueueNameAnnotation: "mine"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "x"}, "p", "s", nil), podTemplate(nil, "p", "s", nil))
		js.Name = "train"
		js.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] = "1"
		res := JobSet(js, nsA, pols)
		gPath := "metadata.annotations[" + GroupNameAnnotation + "]"
		src := Source{Kind: SourceJobSet, Name: "train"}
		lPath := "metadata.labels[" + hbv1.JobSetGangLabel + "]"
		require.Equal(t, []Fill{{Path: rj("1", qPath), Field: FieldQueue, Source: src},
			{Path: rj("0", gPath), Field: FieldGroupName, Source: src}, {Path: rj("0", lPath), Field: FieldGroupName, Source: src},
			{Path: rj("1", gPath), Field: FieldGroupName, Source: src}, {Path: rj("1", lPath), Field: FieldGroupName, Source: src}}, res.Fills)
	})

	t.Run("source strings are the defaulted-by forms", func(t *testing.T) {
		assert.Equal(t, "team-a", Source{Kind: SourcePolicy, Name: "team-a"}.String())
		assert.Equal(t, "namespace:ml", Source{Kind: SourceNamespace, Name: "ml"}.String())
		assert.Equal(t, "jobset:train", Source{Kind: SourceJobSet, Name: "train"}.String())
	})
}
