package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The defaults engine reports the fields it filled as paths such as "spec.queue",
// "metadata.annotations[scheduling.volcano.sh/queue-name]" or
// "spec.replicatedJobs[1].templateSpec.queue". These helpers read and write such paths in an
// object's JSON form (map[string]any with json.Number numbers), for admission warnings and for
// carrying values over from the old object on UPDATE.

// step is one element of a parsed path: a field name, or a bracketed list index or map key.
type step struct {
	key     string
	index   int
	bracket bool // written as [..]
	isIndex bool // bracket holding a list index
}

// parsePath splits a path. Bracket contents are taken verbatim, so map keys may hold '.' and '/'.
func parsePath(p string) ([]step, error) {
	var out []step
	i := 0
	for i < len(p) {
		switch p[i] {
		case '.':
			i++
			continue
		case '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed '['", p)
			}
			inner := p[i+1 : i+end]
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 {
				out = append(out, step{bracket: true, isIndex: true, index: n})
			} else {
				out = append(out, step{bracket: true, key: inner})
			}
			i += end + 1
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			out = append(out, step{key: p[i:j]})
			i = j
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return out, nil
}

func formatPath(steps []step) string {
	var b strings.Builder
	for i, s := range steps {
		switch {
		case s.isIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case s.bracket:
			b.WriteString("[" + s.key + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// toJSONMap renders v as a generic JSON tree, keeping numbers exact. The handlers render only the
// changed parts of an object (mergeTypedChanges); this whole rendering is what that is tested against.
func toJSONMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if raw[0] == '{' { // json.Marshal writes valid JSON
		t := jsonTree{data: raw}
		return t.value().(map[string]any), nil
	}
	return decodeJSONMap(raw)
}

// decodeJSONMap decodes a JSON object as encoding/json's Decoder with UseNumber does. Valid objects,
// which is every request that got this far, take a direct parser (jsonTree) that builds the same
// tree several times faster; anything else gets encoding/json's own answer and error.
func decodeJSONMap(raw []byte) (map[string]any, error) {
	if json.Valid(raw) {
		t := jsonTree{data: raw}
		if m, ok := t.value().(map[string]any); ok {
			return m, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// jsonTree reads JSON that json.Valid accepted into the tree encoding/json builds for an `any` with
// UseNumber: map[string]any, []any (never nil), string, json.Number, bool and nil. Strings holding
// escapes or non-ASCII bytes are unquoted by encoding/json itself.
type jsonTree struct {
	data []byte
	pos  int
}

func (t *jsonTree) value() any {
	t.skipSpace()
	switch t.data[t.pos] {
	case '{':
		m := map[string]any{}
		t.pos++
		for t.skipSpace(); t.data[t.pos] != '}'; t.skipSpace() {
			k := t.string()
			t.skipSpace()
			t.pos++ // ':'
			m[k] = t.value()
			t.skipSpace()
			if t.data[t.pos] == ',' {
				t.pos++
			}
		}
		t.pos++
		return m
	case '[':
		l := make([]any, 0)
		t.pos++
		for t.skipSpace(); t.data[t.pos] != ']'; t.skipSpace() {
			l = append(l, t.value())
			t.skipSpace()
			if t.data[t.pos] == ',' {
				t.pos++
			}
		}
		t.pos++
		return l
	case '"':
		return t.string()
	case 't':
		t.pos += len("true")
		return true
	case 'f':
		t.pos += len("false")
		return false
	case 'n':
		t.pos += len("null")
		return nil
	}
	start := t.pos
	for t.pos < len(t.data) && strings.IndexByte("+-.0123456789eE", t.data[t.pos]) >= 0 {
		t.pos++
	}
	return json.Number(t.data[start:t.pos])
}

func (t *jsonTree) string() string {
	start := t.pos
	plain := true
	for t.pos++; t.data[t.pos] != '"'; t.pos++ {
		switch c := t.data[t.pos]; {
		case c == '\\':
			plain = false
			t.pos++ // the escaped byte, which may be '"'
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	t.pos++
	if plain {
		return string(t.data[start+1 : t.pos-1])
	}
	var s string
	_ = json.Unmarshal(t.data[start:t.pos], &s) // valid, so it cannot fail
	return s
}

func (t *jsonTree) skipSpace() {
	for t.pos < len(t.data) {
		switch t.data[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

// lookup returns the value at steps.
func lookup(root any, steps []step) (any, bool) {
	cur := root
	for _, s := range steps {
		if s.isIndex {
			l, ok := cur.([]any)
			if !ok || s.index >= len(l) {
				return nil, false
			}
			cur = l[s.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[s.key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// set writes v at steps, creating missing objects on the way; list elements must exist.
func set(root map[string]any, steps []step, v any) bool {
	var cur any = root
	for i, s := range steps {
		last := i == len(steps)-1
		if s.isIndex {
			l, ok := cur.([]any)
			if !ok || s.index >= len(l) {
				return false
			}
			if last {
				l[s.index] = v
				return true
			}
			cur = l[s.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if last {
			m[s.key] = v
			return true
		}
		next, ok := m[s.key].(map[string]any)
		if !ok {
			if steps[i+1].isIndex {
				if _, isList := m[s.key].([]any); !isList {
					return false
				}
				cur = m[s.key]
				continue
			}
			next = map[string]any{}
			m[s.key] = next
		}
		cur = next
	}
	return false
}

// counterpart translates a path in the new object into the same place in the old one. List
// elements that carry a "name" (replicatedJobs, tasks) are matched by name, so a reordered list
// still pairs the right elements; other elements by position. ok is false when the old object has
// no such element (a list element new in this update).
func counterpart(newRoot, oldRoot any, steps []step) ([]step, bool) {
	out := make([]step, 0, len(steps))
	nc, oc := newRoot, oldRoot
	for _, s := range steps {
		if !s.isIndex {
			nm, _ := nc.(map[string]any)
			om, ok := oc.(map[string]any)
			if !ok {
				return nil, false
			}
			out = append(out, s)
			nc, oc = nm[s.key], om[s.key]
			continue
		}
		nl, _ := nc.([]any)
		ol, ok := oc.([]any)
		if !ok || s.index >= len(nl) {
			return nil, false
		}
		j := s.index
		if name, named := elementName(nl[s.index]); named {
			j = -1
			for k := range ol {
				if on, _ := elementName(ol[k]); on == name {
					j = k
					break
				}
			}
		}
		if j < 0 || j >= len(ol) {
			return nil, false
		}
		out = append(out, step{bracket: true, isIndex: true, index: j})
		nc, oc = nl[s.index], ol[j]
	}
	return out, true
}

func elementName(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	n, ok := m["name"].(string)
	return n, ok && n != ""
}

// renderValue writes a value for a human: strings bare, everything else as compact JSON.
func renderValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
