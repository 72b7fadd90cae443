package jsonpatch

import "testing"

func TestPaths(t *testing.T) {
	for _, tc := range []struct{ in, round string }{
		{"spec.queue", "spec.queue"},
		{"metadata.annotations[scheduling.volcano.sh/queue-name]", "metadata.annotations[scheduling.volcano.sh/queue-name]"},
		{"spec.replicatedJobs[12].template.spec.template.metadata.annotations[a.b/c]", "spec.replicatedJobs[12].template.spec.template.metadata.annotations[a.b/c]"},
	} {
		steps, err := parsePath(tc.in)
		if err != nil || formatPath(steps) != tc.round {
			t.Errorf("%q: %v %q", tc.in, err, formatPath(steps))
		}
	}
	if _, err := parsePath("a[b"); err == nil {
		t.Error("unclosed bracket accepted")
	}
	// counterpart matches named list elements by name.
	newDoc, _ := decodeJSONMap([]byte(`{"spec":{"rj":[{"name":"b","q":""},{"name":"a","q":""},{"name":"c"}]}}`))
	oldDoc, _ := decodeJSONMap([]byte(`{"spec":{"rj":[{"name":"a","q":"qa"},{"name":"b","q":"qb"}]}}`))
	for in, want := range map[string]string{"spec.rj[0].q": "spec.rj[1].q", "spec.rj[1].q": "spec.rj[0].q", "spec.rj[2].q": ""} {
		steps, _ := parsePath(in)
		got, ok := counterpart(newDoc, oldDoc, steps)
		if (want == "") == ok || ok && formatPath(got) != want {
			t.Errorf("counterpart(%s) = %s %v, want %q", in, formatPath(got), ok, want)
		}
	}
}
