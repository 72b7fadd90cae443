package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// MinTTLSecondsWithoutWarning is the smallest ttlSecondsAfterFinished admitted without a warning:
// below it the finished workload, its pods and their logs are gone almost at once.
const MinTTLSecondsWithoutWarning = 60

// checkFunc judges one object. update is false on CREATE, where old is the zero value.
type checkFunc[T client.Object] func(ctx context.Context, c *checker, obj, old T, update bool) error

// checker collects one request's findings.
type checker struct {
	ns       defaults.Namespace
	pols     *defaults.Policies
	errs     field.ErrorList
	warnings []string
}

// validator is the validating handler of one kind.
type validator[T client.Object] struct {
	handlerBase[T]
	check checkFunc[T]
	// refusedFirst, when set, says why another webhook refuses to create obj ("" when it does not
	// know that it does): such a CREATE is admitted here unchecked, so that webhook's refusal is the
	// one the user sees, whatever order the apiserver's parallel validating calls finish in
	// (docs/webhooks.md, "When Volcano and hyperbatch both refuse").
	refusedFirst func(ctx context.Context, obj T) (string, error)
}

// refuses reports whether this validator, or the webhook refusedFirst defers to, refuses to create
// obj (a CREATE; the mutator asks it about the object it defaulted).
func (v *validator[T]) refuses(ctx context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (bool, error) {
	if v.refusedFirst != nil {
		why, err := v.refusedFirst(ctx, obj)
		if err != nil || why != "" {
			return why != "", err
		}
	}
	c := &checker{ns: ns, pols: pols}
	if err := v.check(ctx, c, obj, v.empty, false); err != nil {
		return false, err
	}
	return len(c.errs) > 0, nil
}

// judge is the validator's findings on a CREATE of obj: its field errors and warnings.
func (v *validator[T]) judge(ctx context.Context, obj T, ns defaults.Namespace, pols *defaults.Policies) (field.ErrorList, []string, error) {
	c := &checker{ns: ns, pols: pols}
	if err := v.check(ctx, c, obj, v.empty, false); err != nil {
		return nil, nil, err
	}
	return c.errs, c.warnings, nil
}

// Handle implements admission.Handler.
func (v *validator[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	return timed("validating", v.kind, req, func() (admission.Response, string) { return v.handle(ctx, req) })
}

func (v *validator[T]) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	log := func() logr.Logger { return requestLog(ctx, "validating", v.kind, req) }
	if err := checkKind(req, v.gvk); err != nil {
		log().Info("rejecting malformed request", "error", err.Error())
		return admission.Errored(http.StatusBadRequest, err), resultError
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || v.excluded[req.Namespace] {
		return admission.Allowed(""), resultAllowed
	}
	obj := v.newObj()
	if err := decodeObject(req.Object.Raw, obj, v.gvk); err != nil {
		log().Info("rejecting undecodable object", "error", err.Error())
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding %s: %w", v.gvk.Kind, err)), resultError
	}
	old := v.newObj()
	update := req.Operation == admissionv1.Update
	if update {
		if err := decodeObject(req.OldObject.Raw, old, v.gvk); err != nil {
			log().Info("rejecting undecodable old object", "error", err.Error())
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old %s: %w", v.gvk.Kind, err)), resultError
		}
		// Finalizer removal and the like must always pass.
		if obj.GetDeletionTimestamp() != nil {
			return admission.Allowed(""), resultAllowed
		}
	}
	ns, err := v.namespace(ctx, req.Namespace)
	if err != nil {
		log().Error(err, "namespace lookup failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	pols, err := v.policies.get(ctx)
	if err != nil {
		log().Error(err, "policy lookup failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	if !update && v.refusedFirst != nil {
		why, err := v.refusedFirst(ctx, obj)
		if err != nil {
			log().Error(err, "validation failed")
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
		}
		if why != "" {
			log().V(1).Info("left to the webhook that refuses it first", "reason", why)
			return admission.Allowed(""), resultAllowed
		}
	}
	c := &checker{ns: ns, pols: pols}
	if err := v.check(ctx, c, obj, old, update); err != nil {
		log().Error(err, "validation failed")
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("hyperbatch: %w", err)), resultError
	}
	if len(c.errs) > 0 {
		log().Info("denied", "reason", c.errs.ToAggregate().Error())
		return invalid(v.gvk, nameOf(obj), c.errs).WithWarnings(c.warnings...), resultDenied
	}
	return admission.Allowed("").WithWarnings(c.warnings...), resultAllowed
}

// invalid is a denial carrying a 422 Invalid status with one cause per field error, as the
// apiserver's own validation answers: clients see apierrors.IsInvalid and kubectl prints each field.
func invalid(gvk schema.GroupVersionKind, name string, errs field.ErrorList) admission.Response {
	st := apierrors.NewInvalid(gvk.GroupKind(), name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}

// queue checks a queue reference's spelling (queueSpelling) and the governing policy's
// allowedQueues. On UPDATE an unchanged queue is not checked again, so tightening a policy never
// blocks updates (or finalizer removal) of workloads admitted before.
func (c *checker) queue(path *field.Path, queue string, update bool, oldQueue string, hadOld bool) {
	if update && hadOld && queue == oldQueue || !c.queueSpelling(path, queue, update, oldQueue, hadOld) {
		return
	}
	if update && hadOld && defaults.NormalizeQueue(queue) == defaults.NormalizeQueue(oldQueue) {
		return
	}
	if ref := defaults.QueueRefusal(queue, c.ns, c.pols); ref != nil {
		c.errs = append(c.errs, field.Forbidden(path, ref.Error()))
	}
}

// queueSpelling refuses a queue reference with surrounding spaces (" team-a ", "namespace/ gpu"):
// Volcano looks a queue up by its exact name, so such a workload would wait for a queue that does
// not exist, and an allowedQueues check on the trimmed name would pass it. A blank reference means
// "no queue" and passes. It reports whether the reference is well spelled; an unchanged reference on
// UPDATE always is (it was admitted before).
func (c *checker) queueSpelling(path *field.Path, queue string, update bool, oldQueue string, hadOld bool) bool {
	if update && hadOld && queue == oldQueue {
		return true
	}
	norm := defaults.NormalizeQueue(queue)
	if norm == "" || norm == queue {
		return true
	}
	c.errs = append(c.errs, field.Invalid(path, queue, fmt.Sprintf("a queue name has no spaces around it or after %q: "+
		"Volcano looks the queue up by its exact name; write %q", defaults.NamespaceQueuePrefix, norm)))
	return false
}

// lifecycleAnnotations checks hyperbatch.dev/ttl-seconds-after-finished and
// hyperbatch.dev/active-deadline-seconds: integers, TTL >= 0, deadline >= 1, and immutable once set.
func (c *checker) lifecycleAnnotations(obj, old metav1.Object, update bool) {
	base := field.NewPath("metadata", "annotations")
	for _, a := range []struct {
		key  string
		min  int64
		bits int
		fix  string
	}{
		{hbv1.TTLSecondsAfterFinishedAnnotation, 0, 32, "use 0 to delete the workload as soon as it finishes, or omit the annotation to keep it"},
		{hbv1.ActiveDeadlineSecondsAnnotation, 1, 64, "omit the annotation for no deadline"},
	} {
		p := base.Key(a.key)
		v, has := obj.GetAnnotations()[a.key]
		if update {
			if was, had := old.GetAnnotations()[a.key]; had {
				if !has {
					c.errs = append(c.errs, field.Forbidden(p, fmt.Sprintf("cannot be removed once set (it is %q): %s", was, immutableFix)))
					continue
				}
				if v != was {
					c.errs = append(c.errs, field.Invalid(p, v, fmt.Sprintf("field is immutable once set (it is %q): %s", was, immutableFix)))
					continue
				}
				continue // unchanged: checked when it was set
			}
		}
		if !has {
			continue
		}
		n, err := strconv.ParseInt(v, 10, a.bits)
		if err != nil {
			c.errs = append(c.errs, field.Invalid(p, v, fmt.Sprintf("must be an integer number of seconds (%d-bit), such as \"3600\"", a.bits)))
			continue
		}
		if n < a.min {
			c.errs = append(c.errs, field.Invalid(p, v, fmt.Sprintf("must be greater than or equal to %d; %s", a.min, a.fix)))
			continue
		}
		if a.key == hbv1.TTLSecondsAfterFinishedAnnotation {
			c.ttlWarning(p, n)
		}
	}
}

// immutableFix tells the user how to get a different TTL or deadline: the lifecycle controller's
// timers are computed from values that never change once set.
const immutableFix = "keep the old value, or delete the workload and create it again with the new one"

// ttlField checks a native spec.ttlSecondsAfterFinished: >= 0 and immutable once set.
func (c *checker) ttlField(p *field.Path, ttl, oldTTL *int32, update bool) {
	if update && oldTTL != nil {
		switch {
		case ttl == nil:
			c.errs = append(c.errs, field.Forbidden(p, fmt.Sprintf("cannot be removed once set (it is %d): %s", *oldTTL, immutableFix)))
		case *ttl != *oldTTL:
			c.errs = append(c.errs, field.Invalid(p, *ttl, fmt.Sprintf("field is immutable once set (it is %d): %s", *oldTTL, immutableFix)))
		}
		return
	}
	if ttl == nil {
		return
	}
	if *ttl < 0 {
		c.errs = append(c.errs, field.Invalid(p, *ttl, "must be greater than or equal to 0; use 0 to delete the workload as soon as it finishes, or omit the field to keep it"))
		return
	}
	c.ttlWarning(p, int64(*ttl))
}

func (c *checker) ttlWarning(p *field.Path, ttl int64) {
	if ttl < MinTTLSecondsWithoutWarning {
		c.warnings = append(c.warnings, fmt.Sprintf("%s%s=%d: the workload is deleted %ds after it finishes, with its pods and their logs; "+
			"use at least %ds to leave time to look at it", warningPrefix, p, ttl, ttl, MinTTLSecondsWithoutWarning))
	}
}
