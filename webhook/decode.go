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
)

// decodeObject decodes an admitted object as controller-runtime's admission decoder does for a
// typed object (member names case-sensitive, integers kept as integers, unknown members ignored;
// a missing apiVersion or kind is taken to be the handler's, another one is refused), without
// parsing the object a second time to find its kind first.
func decodeObject(raw []byte, obj client.Object, gvk schema.GroupVersionKind) error {
	if len(raw) == 0 {
		return errors.New("the request carries no object")
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		return err
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	wantAPIVersion, wantKind := gvk.ToAPIVersionAndKind()
	if apiVersion != "" && apiVersion != wantAPIVersion || kind != "" && kind != wantKind {
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
