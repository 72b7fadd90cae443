package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/hyperbatch/hyperbatch/internal/jsonpatch"
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
	apiVersion, kind, err := jsonpatch.TypeMeta(raw) // raw is valid JSON now
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

// requestLog is the logger for one request, with the request's values and the handler's. It is
// built only where something is logged: adding the values costs more than most of a request's work.
func requestLog(ctx context.Context, webhook string, kind Kind, req admission.Request) logr.Logger {
	return logf.FromContext(ctx).WithValues("webhook", webhook, "kind", kind, "operation", req.Operation,
		"object", klog.KRef(req.Namespace, req.Name), "user", req.UserInfo.Username, "requestID", req.UID, "dryRun", isDryRun(req))
}
