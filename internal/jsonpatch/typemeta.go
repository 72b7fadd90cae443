package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// TypeMeta reads the apiVersion and kind of a valid JSON object exactly as apimachinery's
// SimpleMetaFactory.Interpret does (encoding/json into a two-field struct: member names matched
// case-insensitively, the last match wins, null leaves a field empty, another type is an error),
// without parsing the rest: only the object's top-level members whose names fold to "apiVersion"
// or "kind" are handed to encoding/json.
func TypeMeta(raw []byte) (apiVersion, kind string, err error) {
	t := jsonTree{data: raw}
	t.skipSpace()
	if t.pos >= len(raw) || raw[t.pos] != '{' {
		return "", "", fmt.Errorf("the object is not a JSON object")
	}
	var picked []byte
	plain := true // so far: "apiVersion" and "kind" at most once each, with plain string values
	t.pos++
	for t.skipSpace(); raw[t.pos] != '}'; t.skipSpace() {
		keyStart := t.pos
		t.skipString()
		key := raw[keyStart:t.pos]
		t.skipSpace()
		t.pos++ // ':'
		t.skipSpace()
		valueStart := t.pos
		t.skipValue()
		if typeMetaKey(key) {
			if picked == nil {
				picked = append(make([]byte, 0, 64), '{')
			} else {
				picked = append(picked, ',')
			}
			value := raw[valueStart:t.pos]
			picked = append(append(append(picked, key...), ':'), value...)
			// The common case, read directly: the exact names, once each, plain strings.
			plainValue := value[0] == '"' && bytes.IndexByte(value, '\\') < 0
			switch {
			case plain && plainValue && string(key) == `"apiVersion"` && apiVersion == "":
				apiVersion = string(value[1 : len(value)-1])
			case plain && plainValue && string(key) == `"kind"` && kind == "":
				kind = string(value[1 : len(value)-1])
			default:
				plain = false
			}
		}
		t.skipSpace()
		if raw[t.pos] == ',' {
			t.pos++
		}
	}
	if picked == nil || plain && apiVersion != "" && kind != "" {
		return apiVersion, kind, nil
	}
	var tm struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}
	if err := json.Unmarshal(append(picked, '}'), &tm); err != nil {
		return "", "", fmt.Errorf("couldn't get version/kind: %w", err)
	}
	return tm.APIVersion, tm.Kind, nil
}

// typeMetaKey reports whether a quoted member name folds to "apiVersion" or "kind", as
// encoding/json matches struct fields (bytes.EqualFold).
func typeMetaKey(quoted []byte) bool {
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return false
		}
		name = []byte(s)
	}
	return bytes.EqualFold(name, []byte("apiVersion")) || bytes.EqualFold(name, []byte("kind"))
}
