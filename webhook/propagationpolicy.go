package webhook

import (
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Karmada PropagationPolicies (policy.karmada.io/v1alpha1): placement.clusterAffinity.clusterNames,
// replicaScheduling, spreadConstraints and propagateDeps are defaulted on CREATE and carried over on
// UPDATE. There is no validating webhook: a PropagationPolicy names no queue and no lifecycle.
//
// A PropagationPolicy lives in the Karmada control plane. Where that is a separate karmada-apiserver,
// the mutating configuration for this kind must be registered there too (see docs/webhooks.md).
func (d *deps) propagationPolicyMutator() admission.Handler {
	return &mutator[*policyv1alpha1.PropagationPolicy]{
		handlerBase: base[policyv1alpha1.PropagationPolicy](d, KindPropagationPolicy),
		apply:       defaults.PropagationPolicy,
	}
}
