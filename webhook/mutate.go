package webhook

import (
	"context"
	"fmt"
	"maps"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/jsonpatch"
)

// finishFunc runs after the engine filled something on CREATE. It may change obj further (Pods:
// spec.priority from the PriorityClass), add a note to the warning, or deny the request.
type finishFunc[T client.Object] func(ctx context.Context, obj T, ns defaults.Namespace, res defaults.Result) (note string, deny field.ErrorList, err error)

// mutator is the mutating handler of one kind: it decodes the object, asks the defaults engine to
// fill it from the namespace and the governing WorkloadPolicy, and answers with a JSON patch and a
// warning that lists what was filled.
type mutator[T client.Object] struct {
	handlerBase[T]
	// apply fills the object from the engine; nil: the kind table's engine function (engineOf).
	// One that reads the cluster (a PodGroup's Volcano Job) takes ctx and may fail.
	apply  func(ctx context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (defaults.Result, error)
	finish finishFunc[T]
	// refused is the kind's validator's judgement of the defaulted object (validator.refuses): a CREATE
	// that is then refused, by hyperbatch's validator or by a webhook it defers to, gets no warning.
	refused func(ctx context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (bool, error)
	// judgeCreate, when set, is the kind's validator run on the defaulted object of a CREATE
	// (validator.judge): its refusal is the mutating webhook's answer, and the kind has no
	// validating CREATE entry, so a CREATE costs one webhook call (Pods, docs/webhooks.md "One call
	// per bare Pod").
	judgeCreate func(ctx context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (field.ErrorList, []string, error)
	// copyObj is the copy of the request's object that apply and finish fill on CREATE; nil: a
	// deep copy. A kind whose engine and finish only set fields of the object's own structs and
	// its annotations can use ownTopLevel, which shares everything else with the request's object
	// (FuzzTopLevelCopies checks that the request's object is left as it was).
	copyObj func(T) T
}

// engineOf is the kind table's engine function of kind k, typed for the kind's objects.
func engineOf[T client.Object](k Kind) func(context.Context, T, defaults.Namespace, *defaults.Policies) (defaults.Result, error) {
	def := specOf(k).Default
	return func(_ context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (defaults.Result, error) {
		return def(obj, ns, pols), nil
	}
}

// ownTopLevel copies the object's struct and its annotations; every other map, slice and pointer
// is shared with obj. Writing a field of the copy's own structs, or an annotation, leaves obj as
// it was; writing through a shared pointer, map or slice would not.
func ownTopLevel[O any, T interface {
	*O
	client.Object
}](obj T) T {
	cp := T(new(O))
	*cp = *obj
	cp.SetAnnotations(maps.Clone(obj.GetAnnotations()))
	return cp
}

// handlerBase is what the mutating and validating handlers of one kind share.
type handlerBase[T client.Object] struct {
	*deps
	kind   Kind
	gvk    schema.GroupVersionKind
	carry  defaults.CarryOver
	newObj func() T
	// empty is an empty object of the kind, shared and never written: the "old object" of a CREATE
	// when the mutator asks the validator about it.
	empty T
}

// applyFn is m.apply, or the kind table's engine function.
func (m *mutator[T]) applyFn() func(context.Context, T, defaults.Namespace, *defaults.Policies) (defaults.Result, error) {
	if m.apply != nil {
		return m.apply
	}
	return engineOf[T](m.kind)
}

// base is the handlerBase of kind, whose objects are O.
func base[O any, T interface {
	*O
	client.Object
}](d *deps, kind Kind) handlerBase[T] {
	spec := specOf(kind)
	return handlerBase[T]{deps: d, kind: kind, gvk: spec.GVK, carry: spec.CarryOver, newObj: func() T { return T(new(O)) }, empty: T(new(O))}
}

// Handle implements admission.Handler.
func (m *mutator[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	return timed("mutating", m.kind, req, func() (admission.Response, string) { return m.handle(ctx, req) })
}

func (m *mutator[T]) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if err := checkKind(req, m.gvk); err != nil {
		m.log(ctx, req).Info("rejecting malformed request", "error", err.Error())
		return admission.Errored(http.StatusBadRequest, err), resultError
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || m.excluded[req.Namespace] {
		return admission.Allowed(""), resultAllowed
	}
	obj := m.newObj()
	if err := decodeObject(req.Object.Raw, obj, m.gvk); err != nil {
		m.log(ctx, req).Info("rejecting undecodable object", "error", err.Error())
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding %s: %w", m.gvk.Kind, err)), resultError
	}
	var old T
	if req.Operation == admissionv1.Update {
		old = m.newObj()
		if err := decodeObject(req.OldObject.Raw, old, m.gvk); err != nil {
			m.log(ctx, req).Info("rejecting undecodable old object", "error", err.Error())
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old %s: %w", m.gvk.Kind, err)), resultError
		}
		if obj.GetDeletionTimestamp() != nil {
			return admission.Allowed(""), resultAllowed
		}
	}
	ns, err := m.namespace(ctx, req.Namespace)
	if err != nil {
		m.log(ctx, req).Error(err, "namespace lookup failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	pols, err := m.policies.get(ctx)
	if err != nil {
		m.log(ctx, req).Error(err, "policy lookup failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	if req.Operation == admissionv1.Update {
		return m.update(ctx, req, obj, old, ns, pols)
	}
	return m.create(ctx, req, obj, ns, pols)
}

// log is the request's logger with this handler's values. It is built only where something is
// logged: adding the values costs more than most of a request's work.
func (m *mutator[T]) log(ctx context.Context, req admission.Request) logr.Logger {
	return requestLog(ctx, "mutating", m.kind, req)
}

// debug logs at verbosity v when that level is enabled.
func (m *mutator[T]) debug(ctx context.Context, req admission.Request, v int, msg string, keysAndValues ...any) {
	if logr.FromContextOrDiscard(ctx).V(v).Enabled() { // logf.FromContext would add (empty) values
		m.log(ctx, req).V(v).Info(msg, keysAndValues...)
	}
}

func (m *mutator[T]) create(ctx context.Context, req admission.Request, obj T, ns defaults.Namespace, pols *defaults.Policies) (admission.Response, string) {
	var out T
	if m.copyObj != nil {
		out = m.copyObj(obj)
	} else {
		out = obj.DeepCopyObject().(T)
	}
	res, err := m.applyFn()(ctx, out, ns, pols)
	if err != nil {
		m.log(ctx, req).Error(err, "defaulting failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	if m.judgeCreate != nil {
		errs, warnings, err := m.judgeCreate(ctx, out, ns, pols)
		if err != nil {
			m.log(ctx, req).Error(err, "validation failed")
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
		}
		if len(errs) > 0 {
			m.log(ctx, req).Info("denied", "reason", errs.ToAggregate().Error())
			return invalid(m.gvk, nameOf(obj), errs).WithWarnings(warnings...), resultDenied
		}
	}
	skipped := skippedWarnings(res.Skips)
	quiet := false
	if (res.Changed() || len(skipped) > 0) && m.refused != nil {
		// Warnings are shown with the refusal of a refused request, where "defaulted ..." would read
		// as if the object had been created.
		refused, err := m.refused(ctx, out, ns, pols)
		if err != nil {
			// Only the warning depends on it: the request is not failed for it.
			m.log(ctx, req).Error(err, "judging the defaulted object failed; the warning is given")
		}
		if err == nil && refused {
			// The patch is still given: the prediction is made before later webhooks mutate.
			m.debug(ctx, req, 1, "no warning: the request is refused", "policy", res.Policy)
			skipped, quiet = nil, true
		}
	}
	if !res.Changed() {
		m.debug(ctx, req, 2, "nothing to default", "policy", res.Policy, "skipped", len(skipped))
		return admission.Allowed("").WithWarnings(skipped...), resultAllowed
	}
	var note string
	if m.finish != nil {
		n, deny, err := m.finish(ctx, out, ns, res)
		if err != nil {
			m.log(ctx, req).Error(err, "finishing defaults failed")
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
		}
		if len(deny) > 0 {
			m.log(ctx, req).Info("denied", "policy", res.Policy, "reason", deny.ToAggregate().Error())
			return invalid(m.gvk, nameOf(obj), deny), resultDenied
		}
		note = n
	}
	patched, patch, err := jsonpatch.Diff(req.Object.Raw, obj, out)
	if err != nil {
		m.log(ctx, req).Error(err, "building the patch failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: building the patch: %w", err)), resultError
	}
	resp := patchResponse(patch)
	m.debug(ctx, req, 1, "defaulted", "policy", res.Policy, "fields", res.Paths(), "defaultedBy", res.DefaultedBy)
	if quiet {
		return resp, resultPatched
	}
	warning := defaultedWarning(res.Fills, patched, note)
	return resp.WithWarnings(append([]string{warning}, skipped...)...), resultPatched
}

// update carries defaults over from the old object. The engine is asked which fields it would fill
// in the new object and which it would have filled in the old one; a field it would fill now but
// that the old object had set was dropped by this request (kubectl apply replacing a list, kubectl
// replace, an edit) and gets its old value back. Nothing the old object lacked is introduced on
// UPDATE, so a changed policy never rewrites a running workload, and upstream immutability rules
// (Volcano Job spec, JobSet replicatedJobs) never see a change the user did not make.
func (m *mutator[T]) update(ctx context.Context, req admission.Request, obj, old T, ns defaults.Namespace, pols *defaults.Policies) (admission.Response, string) {
	if m.carry == defaults.CarryOverNone {
		return admission.Allowed(""), resultAllowed
	}
	apply := m.applyFn()
	now, err := apply(ctx, obj.DeepCopyObject().(T), ns, pols)
	if err != nil {
		m.log(ctx, req).Error(err, "defaulting failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	was, err := apply(ctx, old.DeepCopyObject().(T), ns, pols)
	if err != nil {
		m.log(ctx, req).Error(err, "defaulting failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	nowUnset := now.Fills
	wasUnset := map[string]bool{}
	for _, f := range was.Fills {
		wasUnset[f.Path] = true
	}
	paths := make([]string, len(nowUnset))
	for i, f := range nowUnset {
		paths[i] = f.Path
	}
	patch, kept, err := jsonpatch.CarryOver(req.Object.Raw, req.OldObject.Raw, jsonpatch.Carry{
		Paths: paths,
		Skip:  func(oldPath string) bool { return wasUnset[oldPath] },
		// The history annotation is bookkeeping of the object's whole life: keep it too.
		IfBlank: []string{"metadata.annotations[" + hbv1.DefaultedByAnnotation + "]"},
	})
	if err != nil {
		m.log(ctx, req).Error(err, "building the patch failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	resp := patchResponse(patch)
	if len(patch) == 0 {
		return resp, resultAllowed
	}
	// No warning: nothing changes from the user's point of view, and a warning on every re-apply of
	// an unchanged manifest would be noise.
	m.debug(ctx, req, 1, "kept defaults the update dropped", "fields", kept)
	return resp, resultPatched
}

// patchResponse admits with an encoded JSON patch, as admission.PatchResponseFromRaw does
// (Response.Patch set and Response.Patches left empty, so Response.Complete does not encode it
// again with json.Marshal).
func patchResponse(patch []byte) admission.Response {
	resp := admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}}
	if len(patch) == 0 {
		return resp
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp
}

// checkKind refuses a request for a kind this handler does not serve (a misconfigured webhook).
func checkKind(req admission.Request, gvk schema.GroupVersionKind) error {
	got := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	if got != gvk {
		return fmt.Errorf("this webhook admits %s, not %q", gvk, got)
	}
	return nil
}

func isDryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

// nameOf is the object's name for messages; generateName with a '*' before the apiserver made one.
func nameOf(obj client.Object) string {
	if n := obj.GetName(); n != "" {
		return n
	}
	if g := obj.GetGenerateName(); g != "" {
		return g + "*"
	}
	return ""
}
