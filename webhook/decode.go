package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// decodeObject decodes an admitted object as controller-runtime's admission decoder does for a
// typed object: the object with member names matched case-sensitively, integers kept as integers
// and unknown members ignored; its apiVersion and kind as apimachinery's meta factory reads them
// (typeMeta), a missing part taken from the handler's kind, any other kind refused. It costs one
// decode and a scan of the object's top level, where that decoder parsed the object twice.
func decodeObject(raw []byte, obj client.Object, gvk schema.GroupVersionKind) error {
	if len(raw) == 0 {
		return errors.New("the request carries no object")
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		return err
	}
	apiVersion, kind, err := typeMeta(raw) // raw is valid JSON now
	if err != nil {
		return err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return err
	}
	// What apimachinery's decoder fills in from the type decoded into (gvkWithDefaults).
	got := gv.WithKind(kind)
	if got.Kind == "" {
		got.Kind = gvk.Kind
	}
	if got.Version == "" && got.Group == "" {
		got.Group, got.Version = gvk.Group, gvk.Version
	}
	if got.Version == "" {
		got.Version = gvk.Version
	}
	if got != gvk {
		return fmt.Errorf("the object has apiVersion %q and kind %q; this webhook admits %s", apiVersion, kind, gvk)
	}
	return nil
}

// typeMeta reads the apiVersion and kind of a valid JSON object exactly as apimachinery's
// SimpleMetaFactory.Interpret does (encoding/json into a two-field struct: member names matched
// case-insensitively, the last match wins, null leaves a field empty, another type is an error),
// without parsing the rest: only the object's top-level members whose names fold to "apiVersion"
// or "kind" are handed to encoding/json.
func typeMeta(raw []byte) (apiVersion, kind string, err error) {
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

// requestLog is the logger for one request, with the request's values and the handler's. It is
// built only where something is logged: adding the values costs more than most of a request's work.
func requestLog(ctx context.Context, webhook string, kind Kind, req admission.Request) logr.Logger {
	return logf.FromContext(ctx).WithValues("webhook", webhook, "kind", kind, "operation", req.Operation,
		"object", klog.KRef(req.Namespace, req.Name), "user", req.UserInfo.Username, "requestID", req.UID, "dryRun", isDryRun(req))
}
