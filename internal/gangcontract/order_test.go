package gangcontract

import (
	"sort"
	"testing"
	"time"
)

func TestOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	gangs := []Order{
		{Priority: 0, Created: t0, Namespace: "b", Name: "x"},
		{Priority: 0, Created: t0, Namespace: "a-b", Name: "x"},
		{Priority: 0, Created: t0, Namespace: "a", Name: "y"},
		{Priority: 0, Created: t0, Namespace: "a", Name: "x"},
		{Priority: 0, Created: t0.Add(-time.Second), Namespace: "z", Name: "z"},
		{Priority: 10, Created: t0.Add(time.Hour), Namespace: "z", Name: "z"},
	}
	sort.SliceStable(gangs, func(i, j int) bool { return gangs[i].Before(gangs[j]) })
	want := []string{"z/z@10", "z/z@0", "a/x@0", "a/y@0", "a-b/x@0", "b/x@0"}
	for i, g := range gangs {
		got := g.Namespace + "/" + g.Name + "@" + map[int32]string{0: "0", 10: "10"}[g.Priority]
		if got != want[i] {
			t.Fatalf("position %d: got %s, want %s (order %v)", i, got, want[i], gangs)
		}
		if g.Before(g) {
			t.Fatalf("%v is before itself", g)
		}
	}
}
