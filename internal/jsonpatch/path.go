package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
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
	out := make([]step, 0, 6)
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

// decodeValidJSONMap is decodeJSONMap for JSON already known to be valid (the handlers decode
// each object into its Go type first, which checks that): it skips the validity check.
func decodeValidJSONMap(raw []byte) (map[string]any, error) {
	if len(raw) > 0 && raw[0] == '{' {
		t := jsonTree{data: raw}
		if m, ok := t.value().(map[string]any); ok {
			return m, nil
		}
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
	lazy bool // members that are objects or lists are left as rawNodes (lazyjson.go)
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
			m[k] = t.member()
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
			l = append(l, t.member())
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
	cur := expand(root)
	for _, s := range steps {
		if s.isIndex {
			l, ok := cur.([]any)
			if !ok || s.index >= len(l) {
				return nil, false
			}
			cur = expand(l[s.index])
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[s.key]; !ok {
			return nil, false
		}
		cur = expand(cur)
	}
	return cur, true
}

// tree is a JSON object being written to that shares what it has not changed with the object it
// started from (sharingTree): each map and list on the way to a write is copied the first time a
// write goes through it. The original is never changed, making the tree costs nothing, and every
// part that is not written stays shared with the original, so the diff against it (jsonPatch)
// skips those parts by identity instead of comparing them.
type tree struct {
	root  map[string]any
	owned []unsafe.Pointer // containers this tree copied or created, so written in place
}

func sharingTree(orig map[string]any) *tree {
	root := maps.Clone(orig)
	if root == nil {
		root = map[string]any{}
	}
	return &tree{root: root, owned: []unsafe.Pointer{mapID(root)}}
}

// writable returns c (a value held by a container the tree may write) ready to be written: c
// itself when this tree made it, otherwise a shallow copy the caller must store in c's place.
func (t *tree) writable(c any) any {
	c = expand(c)
	var id unsafe.Pointer
	switch x := c.(type) {
	case map[string]any:
		id = mapID(x)
	case []any:
		if len(x) == 0 {
			return x // nothing can be written into an empty list
		}
		id = listID(x)
	default:
		return c
	}
	if slices.Contains(t.owned, id) {
		return c
	}
	switch x := c.(type) {
	case map[string]any:
		cp := maps.Clone(x)
		t.owned = append(t.owned, mapID(cp))
		return cp
	default:
		cp := slices.Clone(x.([]any))
		t.owned = append(t.owned, listID(cp))
		return cp
	}
}

// newMap is an empty map the tree owns.
func (t *tree) newMap() map[string]any {
	m := map[string]any{}
	t.owned = append(t.owned, mapID(m))
	return m
}

// mapID and listID identify a map and a non-empty list: two values with one identity are the same
// container.
func mapID(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }
func listID(l []any) unsafe.Pointer         { return unsafe.Pointer(unsafe.SliceData(l)) }

// set writes v at steps, creating missing objects on the way; list elements must exist.
func set(t *tree, steps []step, v any) bool {
	var cur any = t.root
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
			next := t.writable(l[s.index])
			l[s.index] = next
			cur = next
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
		switch next := expand(m[s.key]).(type) {
		case map[string]any:
			cp := t.writable(next)
			m[s.key] = cp
			cur = cp
			continue
		case []any:
			if steps[i+1].isIndex {
				cp := t.writable(next)
				m[s.key] = cp
				cur = cp
				continue
			}
		default:
			if steps[i+1].isIndex {
				return false
			}
		}
		nm := t.newMap()
		m[s.key] = nm
		cur = nm
	}
	return false
}

// remove deletes the member at steps, if there is one.
func remove(t *tree, steps []step) {
	if len(steps) == 0 {
		return
	}
	parent, ok := lookup(t.root, steps[:len(steps)-1])
	if !ok {
		return
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return
	}
	if _, has := m[steps[len(steps)-1].key]; !has {
		return
	}
	// Make the way to the parent writable; set with the parent's own value does that.
	if len(steps) == 1 {
		delete(t.root, steps[0].key)
		return
	}
	cp := t.writable(m).(map[string]any)
	delete(cp, steps[len(steps)-1].key)
	set(t, steps[:len(steps)-1], cp)
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
	switch x := v.(type) {
	case string:
		return x
	case json.Number: // json.Marshal writes a number as it is
		if _, err := strconv.ParseFloat(string(x), 64); err == nil {
			return string(x)
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}
