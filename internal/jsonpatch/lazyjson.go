package jsonpatch

import (
	"encoding/json"
	"strings"
)

// rawNode is an object or a list of a request's JSON that has not been parsed: its text, and the
// one level parsed from it once something looked inside (members that are objects or lists are
// rawNodes again). The tree a CREATE's patch is built on (decodeLazyJSONMap) parses a container
// only when a write goes into it or the diff compares it, so the parts the defaults never touch
// (containers, volumes, tasks, status) cost a scan instead of a tree of maps.
//
// Every reader of such a tree looks through rawNodes with expand (lookup, set, the tree's copies,
// jsonPatch); a value that leaves the tree whole is encoded by MarshalJSON as the parsed tree would be.
type rawNode struct {
	data   []byte
	parsed any // map[string]any or []any once expanded
}

// MarshalJSON encodes the node exactly as json.Marshal encodes its fully parsed tree.
func (n *rawNode) MarshalJSON() ([]byte, error) { return json.Marshal(materialize(n)) }

// expand returns v, or the parsed level of v when it is a rawNode.
func expand(v any) any {
	n, ok := v.(*rawNode)
	if !ok {
		return v
	}
	if n.parsed == nil {
		t := jsonTree{data: n.data, lazy: true}
		n.parsed = t.value()
	}
	return n.parsed
}

// materialize returns v with every rawNode in it parsed whole, sharing nothing with v's containers.
func materialize(v any) any {
	switch x := v.(type) {
	case *rawNode:
		t := jsonTree{data: x.data}
		return t.value()
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = materialize(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = materialize(e)
		}
		return l
	}
	return v
}

// decodeLazyJSONMap is decodeValidJSONMap parsing only the top level: the members that are objects
// or lists are rawNodes. raw must be valid JSON.
func decodeLazyJSONMap(raw []byte) (map[string]any, error) {
	if len(raw) > 0 && raw[0] == '{' {
		t := jsonTree{data: raw, lazy: true}
		if m, ok := t.value().(map[string]any); ok {
			return m, nil
		}
	}
	return decodeJSONMap(raw)
}

// member reads a member of an object or list: a rawNode for an object or list when t is lazy.
func (t *jsonTree) member() any {
	if !t.lazy {
		return t.value()
	}
	t.skipSpace()
	if c := t.data[t.pos]; c != '{' && c != '[' {
		return t.value()
	}
	start := t.pos
	t.skipContainer()
	return &rawNode{data: t.data[start:t.pos]}
}

// skipValue moves past the value that starts at t.pos.
func (t *jsonTree) skipValue() {
	switch t.data[t.pos] {
	case '{', '[':
		t.skipContainer()
	case '"':
		t.skipString()
	default: // a number, true, false or null
		for t.pos < len(t.data) && strings.IndexByte(",}] \t\n\r", t.data[t.pos]) < 0 {
			t.pos++
		}
	}
}

// skipString moves past the string that starts at t.pos.
func (t *jsonTree) skipString() {
	for t.pos++; t.data[t.pos] != '"'; t.pos++ {
		if t.data[t.pos] == '\\' {
			t.pos++ // the escaped byte, which may be '"'
		}
	}
	t.pos++
}

// skipContainer moves past the object or list that starts at t.pos.
func (t *jsonTree) skipContainer() {
	depth := 0
	for {
		switch t.data[t.pos] {
		case '"':
			t.skipString()
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				t.pos++
				return
			}
		}
		t.pos++
	}
}
