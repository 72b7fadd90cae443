package jsonpatch

import (
	"bytes"
	"encoding/json"
	"testing"

	gjp "gomodules.xyz/jsonpatch/v2"
)

func checkEncodePatch(t *testing.T, ops []gjp.JsonPatchOperation) {
	t.Helper()
	want, wantErr := json.Marshal(ops)
	got, err := encodePatch(ops)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encodePatch differs from json.Marshal\n got %s\nwant %s", got, want)
	}
}

func TestEncodePatch(t *testing.T) {
	tree, err := decodeJSONMap([]byte(`{"b":[1,2.5e3,-0,true,false,null,{"z":{},"a":[]}],"a":"x<y>&\"q\"\\ \u2028 \t\n\u0001 é 日本",` +
		`"c":{"k/~":"v"},"n":12345678901234567890,"e":""}`))
	if err != nil {
		t.Fatal(err)
	}
	checkEncodePatch(t, []gjp.JsonPatchOperation{
		{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"hyperbatch.dev/defaulted-by": "team-a/queue"}},
		{Operation: "replace", Path: "/spec/schedulerName", Value: "hyperbatch-scheduler"},
		{Operation: "add", Path: "/spec/priority", Value: json.Number("1000")},
		{Operation: "add", Path: "/spec/x", Value: nil},
		{Operation: "replace", Path: "/spec/y", Value: nil},
		{Operation: "remove", Path: "/spec/z"},
		{Operation: "add", Path: "/a~1b~0c", Value: tree},
		{Operation: "add", Path: "/l", Value: []any{}},
		{Operation: "add", Path: "/nl", Value: []any(nil)},
		{Operation: "add", Path: "/m", Value: map[string]any{}},
		{Operation: "add", Path: "/i", Value: int64(-7)},
		{Operation: "add", Path: "/f", Value: 1.5},
		{Operation: "add", Path: "/s", Value: map[string]string{"k": "v"}},
		{Operation: "add", Path: "/bad\xff", Value: "\xfe"},
		{Operation: "add", Path: "/nm", Value: map[string]any(nil)},
	})
	// A lazily parsed tree encodes as the whole tree.
	lazy, err := decodeLazyJSONMap([]byte(`{"b":{"z":[{"y":1,"x":"<"}],"a":null},"a":[[1],{"k":"v"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodePatch([]gjp.JsonPatchOperation{{Operation: "add", Path: "/l", Value: lazy}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal([]gjp.JsonPatchOperation{{Operation: "add", Path: "/l", Value: materialize(lazy)}})
	if !bytes.Equal(got, want) {
		t.Errorf("lazy tree encodes as %s, the whole tree as %s", got, want)
	}
	checkEncodePatch(t, []gjp.JsonPatchOperation{})
	// An invalid number fails as it does in json.Marshal.
	checkEncodePatch(t, []gjp.JsonPatchOperation{{Operation: "add", Path: "/n", Value: json.Number("1x")}})
}

// Any JSON tree is encoded byte for byte as json.Marshal encodes it.
func FuzzEncodePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,"<x>",null,true]},"c":"\u00e9\u2029"}`), "/a", "add")
	f.Add([]byte(`{"":{"\u0000":-1.5E+7}}`), "/~0~1", "replace")
	f.Fuzz(func(t *testing.T, doc []byte, path, op string) {
		tree, err := decodeJSONMap(doc)
		if err != nil {
			return
		}
		checkEncodePatch(t, []gjp.JsonPatchOperation{{Operation: op, Path: path, Value: tree}, {Operation: "remove", Path: path}})
	})
}
