package webhook

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// WorkloadPolicies are checked for a namespaceSelector that could not be applied: a wrong or
// lower-case operator, values where they are required or forbidden, bad label keys or values
// (defaults.ValidateNamespaceSelector). The CRD's CEL rules check the names; a CRD rule over the
// selector's unbounded lists is beyond the CRD's cost budget, so the ValidatingAdmissionPolicy of
// WorkloadPolicyCheck checks the selector in kube-apiserver (with the manager down too) and this
// fail-open webhook repeats it with one message per field. An unchanged selector is not judged again
// on UPDATE.
func (d *deps) workloadPolicyValidator() admission.Handler {
	return &validator[*hbv1.WorkloadPolicy]{
		handlerBase: base[hbv1.WorkloadPolicy](d, KindWorkloadPolicy),
		check: func(_ context.Context, c *checker, p, old *hbv1.WorkloadPolicy, update bool) error {
			if update && reflect.DeepEqual(p.Spec.NamespaceSelector, old.Spec.NamespaceSelector) {
				return nil
			}
			c.errs = append(c.errs, defaults.ValidateNamespaceSelector(p.Spec.NamespaceSelector, field.NewPath("spec", "namespaceSelector"))...)
			return nil
		},
	}
}
