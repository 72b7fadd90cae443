package jsonpatch

import (
	"fmt"
	"strings"

	gjp "gomodules.xyz/jsonpatch/v2"
)

// Doc is a patched object's JSON tree, read-only.
type Doc struct{ root map[string]any }

// Value is the value at path rendered for a human (strings bare, everything else as compact
// JSON); ok is false when the path is malformed or holds nothing.
func (d Doc) Value(path string) (value string, ok bool) {
	steps, err := parsePath(path)
	if err != nil {
		return "", false
	}
	v, ok := lookup(d.root, steps)
	if !ok {
		return "", false
	}
	return renderValue(v), true
}

// Diff applies to raw (a request's object, valid JSON) every change between two renderings of the
// typed object, before and after defaulting, and returns the patched object and the encoded JSON
// patch from raw to it (nil when nothing changed).
//
// Diffing the renderings (not raw against the rendering) keeps fields the Go types do not know (a
// newer CRD than our API module) and never adds the zero values a typed rendering writes; applying
// the changes to raw creates the parents raw lacks. Only the parts of the two objects that differ
// are rendered (mergeTypedChanges). The changes go into a tree that shares every unchanged part
// with raw's (sharingTree), and raw is parsed only along the paths written (decodeLazyJSONMap).
func Diff(raw []byte, before, after any) (Doc, []byte, error) {
	orig, err := decodeLazyJSONMap(raw)
	if err != nil {
		return Doc{}, nil, err
	}
	dst := sharingTree(orig)
	// Exactly what mergeChanges(dst, toJSONMap(before), toJSONMap(after), nil) writes (FuzzTypedChanges).
	if err := mergeTypedChanges(dst, before, after, make([]step, 0, 8)); err != nil {
		return Doc{}, nil, err
	}
	patch, err := encode(jsonPatch(orig, dst.root))
	return Doc{root: dst.root}, patch, err
}

// Carry says which values an UPDATE takes back from the old object.
type Carry struct {
	// Paths are paths in the new object. Each gets the value its counterpart has in the old
	// object (list elements with a "name" are matched by name), unless the old object lacks it or
	// Skip reports true for the counterpart's path.
	Paths []string
	Skip  func(oldPath string) bool
	// IfBlank are paths that get the old object's value only where the new object's is absent,
	// null or blank and the old one's is not.
	IfBlank []string
}

// CarryOver returns the encoded JSON patch that applies c to newRaw (nil when nothing changes) and
// the Paths it changed. Both raw objects must be valid JSON.
func CarryOver(newRaw, oldRaw []byte, c Carry) (patch []byte, kept []string, err error) {
	newDoc, err := decodeValidJSONMap(newRaw)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the new object: %w", err)
	}
	dst := sharingTree(newDoc) // the carried-over values go in here; newDoc stays as it came
	oldDoc, err := decodeValidJSONMap(oldRaw)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the old object: %w", err)
	}
	for _, p := range c.Paths {
		steps, err := parsePath(p)
		if err != nil {
			return nil, nil, err
		}
		oldSteps, ok := counterpart(dst.root, oldDoc, steps)
		if !ok || c.Skip != nil && c.Skip(formatPath(oldSteps)) {
			continue
		}
		v, ok := lookup(oldDoc, oldSteps)
		if !ok {
			continue
		}
		if set(dst, steps, v) {
			kept = append(kept, p)
		}
	}
	for _, p := range c.IfBlank {
		steps, err := parsePath(p)
		if err != nil {
			return nil, nil, err
		}
		if cur, _ := lookup(dst.root, steps); isBlank(cur) {
			if prev, ok := lookup(oldDoc, steps); ok && !isBlank(prev) {
				set(dst, steps, prev)
			}
		}
	}
	patch, err = encode(jsonPatch(newDoc, dst.root))
	return patch, kept, err
}

// encode is encodePatch, nil for no operations.
func encode(ops []gjp.JsonPatchOperation) ([]byte, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	patch, err := encodePatch(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the JSON patch: %w", err)
	}
	return patch, nil
}

func isBlank(v any) bool {
	s, ok := v.(string)
	return v == nil || ok && strings.TrimSpace(s) == ""
}
