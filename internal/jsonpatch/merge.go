package jsonpatch

import (
	"encoding/json"
	"reflect"
)

// mergeChanges writes into dst, at the same paths, every difference between before and after.
// Maps and equally long lists are compared member by member, so only the changed leaves (or the
// smallest changed subtree dst cannot descend into) are written.
func mergeChanges(dst *tree, before, after any, at []step) {
	switch a := after.(type) {
	case map[string]any:
		b, ok := before.(map[string]any)
		if !ok || len(at) > 0 && !isMapAt(dst, at) {
			break
		}
		p, last := withStep(at)
		for k, av := range a {
			p[last] = step{key: k}
			if bv, ok := b[k]; ok {
				mergeChanges(dst, bv, av, p)
			} else {
				set(dst, p, av)
			}
		}
		for k := range b {
			if _, ok := a[k]; !ok {
				p[last] = step{key: k}
				remove(dst, p)
			}
		}
		return
	case []any:
		b, ok := before.([]any)
		cur, _ := lookup(dst.root, at)
		dl, dok := cur.([]any)
		if !ok || !dok || len(b) != len(a) || len(dl) != len(a) {
			break
		}
		p, last := withStep(at)
		for i := range a {
			p[last] = step{bracket: true, isIndex: true, index: i}
			mergeChanges(dst, b[i], a[i], p)
		}
		return
	}
	if len(at) == 0 || equalJSON(before, after) {
		return
	}
	if after == nil {
		remove(dst, at)
		return
	}
	set(dst, at, after)
}

// withStep returns at with room for one more step, at index last. Each member of a map or list
// overwrites that step in turn: a path is only read during the call it is passed to, so the
// recursion shares one backing array instead of copying the path for every member.
func withStep(at []step) (p []step, last int) {
	at = append(at, step{})
	return at, len(at) - 1
}

// equalJSON reports whether two JSON trees are equal (reflect.DeepEqual, with the scalars compared
// directly).
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func isMapAt(t *tree, at []step) bool {
	v, ok := lookup(t.root, at)
	if !ok {
		return true // set creates it
	}
	_, isMap := v.(map[string]any)
	return isMap
}
