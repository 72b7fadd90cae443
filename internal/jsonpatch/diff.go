package jsonpatch

import (
	"reflect"
	"strconv"
	"strings"

	gjp "gomodules.xyz/jsonpatch/v2"
)

// jsonPatch returns the RFC 6902 operations that turn the JSON tree from into to. It is the diff
// admission.PatchResponseFromRaw computes (gomodules.xyz/jsonpatch's CreatePatch), run on trees the
// handler has already decoded instead of on their encodings: a member only in to is added whole, a
// member only in from is removed, values of different types are replaced, objects are compared
// member by member, lists element by element (the extra tail removed from the end or added). A map
// or list that is the same container in both trees is unchanged and not looked into.
func jsonPatch(from, to any) []gjp.JsonPatchOperation {
	ops := make([]gjp.JsonPatchOperation, 0, 8) // never nil, as CreatePatch
	var path []string
	var diff func(a, b any)
	emit := func(op string, value any) {
		ops = append(ops, gjp.NewOperation(op, pointer(path), value))
	}
	diff = func(a, b any) {
		if ra, ok := a.(*rawNode); ok && ra == b { // one unparsed part of a lazy tree: unchanged
			return
		}
		a, b = expand(a), expand(b)
		if a == nil && b == nil {
			return
		}
		if reflect.TypeOf(a) != reflect.TypeOf(b) {
			emit("replace", b)
			return
		}
		switch at := a.(type) {
		case map[string]any:
			bt := b.(map[string]any)
			if mapID(at) == mapID(bt) { // shared by a sharingTree with its original: unchanged
				return
			}
			for k, bv := range bt {
				path = append(path, k)
				if av, ok := at[k]; ok {
					diff(av, bv)
				} else {
					emit("add", bv)
				}
				path = path[:len(path)-1]
			}
			for k := range at {
				if _, ok := bt[k]; !ok {
					path = append(path, k)
					emit("remove", nil)
					path = path[:len(path)-1]
				}
			}
		case []any:
			bt := b.([]any)
			if len(at) == len(bt) && (len(at) == 0 || listID(at) == listID(bt)) {
				return
			}
			n := min(len(at), len(bt))
			for i := len(at) - 1; i >= n; i-- {
				path = append(path, strconv.Itoa(i))
				emit("remove", nil)
				path = path[:len(path)-1]
			}
			for i := n; i < len(bt); i++ {
				path = append(path, strconv.Itoa(i))
				emit("add", bt[i])
				path = path[:len(path)-1]
			}
			for i := 0; i < n; i++ {
				path = append(path, strconv.Itoa(i))
				diff(at[i], bt[i])
				path = path[:len(path)-1]
			}
		default: // string, json.Number, bool: comparable
			if a != b {
				emit("replace", b)
			}
		}
	}
	diff(from, to)
	return ops
}

// pointer is the JSON pointer (RFC 6901) of a path of member names and list indexes.
func pointer(path []string) string {
	n := 0
	for _, p := range path {
		n += 1 + len(p)
	}
	b := make([]byte, 0, n+4)
	for _, p := range path {
		b = append(b, '/')
		if !strings.ContainsAny(p, "~/") {
			b = append(b, p...)
			continue
		}
		for i := 0; i < len(p); i++ {
			switch p[i] {
			case '~':
				b = append(b, "~0"...)
			case '/':
				b = append(b, "~1"...)
			default:
				b = append(b, p[i])
			}
		}
	}
	return string(b)
}
