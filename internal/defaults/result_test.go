package defaults

import "testing"

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
