package jsonpatch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// A lazily parsed object holds what a whole parse holds, and encodes the same.
func FuzzLazyJSON(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":"x]}\"{["}],"d":[]},"e":"\u00e9\\\"","f":[[[]]],"g":{}}`))
	f.Add([]byte(`{"spec":{"tasks":[{"name":"w","template":{"spec":{"containers":[{"name":"c"}]}}}]},"s":" } ] "}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
			return
		}
		full, err := decodeJSONMap(raw)
		if err != nil {
			return // valid JSON, but not an object
		}
		lazy, err := decodeLazyJSONMap(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := materialize(lazy); !reflect.DeepEqual(got, full) {
			t.Fatalf("lazy tree %v, whole tree %v", got, full)
		}
		// Expanding level by level reaches the same tree.
		if got := expandAll(lazy); !reflect.DeepEqual(got, full) {
			t.Fatalf("expanded tree %v, whole tree %v", got, full)
		}
		a, errA := json.Marshal(lazy)
		b, errB := json.Marshal(full)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Fatalf("encodings differ: %s (%v) vs %s (%v)", a, errA, b, errB)
		}
	})
}

func expandAll(v any) any {
	switch x := expand(v).(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = expandAll(e)
		}
		return m
	case []any:
		l := []any{}
		for _, e := range x {
			l = append(l, expandAll(e))
		}
		return l
	default:
		return x
	}
}
