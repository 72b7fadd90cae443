package jsonpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"testing"

	gjp "gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/runtime"
)

// jsonPatch is the patch admission.PatchResponseFromRaw would compute from the two encodings.
func TestJSONPatchMatchesCreatePatch(t *testing.T) {
	docs := []string{
		`{}`,
		`{"a":1}`,
		`{"a":1.50,"b":"x","c":true,"d":null}`,
		`{"a":"1","b":"x","c":false,"d":{}}`,
		`{"metadata":{"name":"p","annotations":{"x/y":"1","a~b":"2"}},"spec":{"l":[1,2,3],"m":[{"name":"w","q":"a"}]}}`,
		`{"metadata":{"name":"p","annotations":{"x/y":"2"}},"spec":{"l":[1,4],"m":[{"name":"w","q":"b","n":{"k":[]}}]}}`,
		`{"metadata":{"name":"p"},"spec":{"l":[1,2,3,4,5],"m":{"name":"w"}}}`,
		`{"spec":{"l":null,"m":[]}}`,
	}
	for _, from := range docs {
		for _, to := range docs {
			want, err := gjp.CreatePatch([]byte(from), []byte(to))
			if err != nil {
				t.Fatal(err)
			}
			a, _ := decodeJSONMap([]byte(from))
			b, _ := decodeJSONMap([]byte(to))
			got := jsonPatch(a, runtime.DeepCopyJSON(b))
			if g, w := canonical(t, got), canonical(t, want); g != w {
				t.Errorf("%s -> %s:\n got %s\nwant %s", from, to, g, w)
			}
		}
	}
}

// canonical encodes ops in path order; both sides emit object members in map order.
func canonical(t *testing.T, ops []gjp.JsonPatchOperation) string {
	t.Helper()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// decodeJSONMap builds exactly the tree encoding/json's Decoder builds with UseNumber.
func FuzzDecodeJSONMap(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : [ 1, -2.5e+3, true, false, null, {}, [] ] , "b\"c\\u00e9\n": "x\u2028y", "a": 2 } `,
		`{"k":"caf\xc3\xa9","bad":"\xff"}`, `[]`, `null`, `{"a":1}x`, `{"a":}`, `"s"`, `{"\ud83d\ude00":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotErr := decodeJSONMap(raw)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var want map[string]any
		wantErr := dec.Decode(&want)
		if wantErr == nil && want == nil {
			wantErr = errors.New("not a JSON object")
		}
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: error %v, want %v", raw, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v, want %#v", raw, got, want)
		}
	})
}
