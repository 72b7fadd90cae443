// Package admissionpolicy is hyperbatch's in-process admission mode: the WorkloadPolicy defaults
// and checks of a kind, applied inside kube-apiserver by a MutatingAdmissionPolicy and
// ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) instead of a webhook call.
//
// The Go engine (internal/defaults) stays the one source of truth. For every governed namespace the
// manager writes a param object (a ConfigMap named ParamsName in the namespace) with what the engine
// decides there: the values it fills, the defaulted-by value and warning for each combination of
// fields it fills (found by running the engine on probe objects), and the allowed queues with their
// refusal messages. The generated policies only test which fields of the request are unset and copy
// the namespace's values in; their bindings name no param namespace, so the apiserver reads the
// ConfigMap of the request's own namespace.
//
// Which kinds the policies cover is the Programs table (Pods); every other kind of the kind table
// keeps its webhook, for the reasons docs/webhooks.md lists.
package admissionpolicy
