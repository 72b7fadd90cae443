// Package hyperjob is the HyperJob controller: it splits each Volcano HyperJob
// (training.volcano.sh/v1alpha1) into child Volcano Jobs and Karmada PropagationPolicies — one pair
// per replica, or per split part with a static splitPolicy — keeps them matching the spec (one child
// recreated at a time on a template change, PropagationPolicies updated in place by server-side
// apply), fills what the HyperJob leaves open from the namespace's WorkloadPolicies through the one
// defaults engine (internal/defaults), and aggregates the children's state into the HyperJob's status
// with Kubernetes-Job-like terminal conditions. docs/hyperjob.md describes the behaviour in full.
//
// Wiring: hyperjob.NewReconciler(mgr).SetupWithManager(mgr).
package hyperjob
