// Package webhook is hyperbatch's admission: a mutating and a validating handler per kind (Pod,
// Volcano Job, PodGroup, JobSet, HyperJob; Karmada PropagationPolicy is mutated only), one file per
// kind, all served by the controller-runtime manager's webhook server, and the
// Mutating/ValidatingWebhookConfigurations that send them requests. docs/webhooks.md is the
// operator's guide; this comment is the code's.
//
// # Wiring
//
//	mgr, _ := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), WebhookServer: srv})
//	err := webhook.Setup(mgr, webhook.Options{})                 // handlers + informers
//	err = mgr.AddReadyzCheck("webhook", webhook.ReadyCheck(mgr)) // serving and synced
//	mwc, vwc := webhook.Configurations(webhook.ConfigOptions{})  // Service mode, or URL: "https://..."
//
// config/webhook/manifests.yaml is Configurations(ConfigOptions{}) rendered by
// `go run ./webhook/cmd/genmanifests`; TestManifestsInSync fails when they differ.
//
// # Mutation
//
// Defaulting is the defaults engine's (internal/defaults); the handlers only feed it and turn its
// result into a response. A request is decoded (a malformed one is answered 400), its namespace and
// the WorkloadPolicies are read from the manager's cache (the compiled policies are rebuilt only
// after a WorkloadPolicy event), and:
//
//   - CREATE: the engine fills the object; the JSON patch carries exactly the engine's changes,
//     applied to the request's own JSON, so fields the Go types do not know survive; a warning
//     lists each filled field with its value and source. For Pods a filled priorityClassName also
//     sets spec.priority and preemptionPolicy from the PriorityClass, or denies the Pod when the
//     class does not exist. The patch and the warning's values come from internal/jsonpatch
//     (Diff), the warning's sources from the engine's Result.Fills.
//   - UPDATE: nothing new is filled. The engine tells which fields it would fill in the new object
//     and which it would have filled in the old one; a field the old object had set and the request
//     dropped gets its old value back. This keeps `kubectl apply` (client- and server-side)
//     idempotent, keeps running workloads as they were admitted when a policy changes, and never
//     trips upstream immutability (Volcano Job spec, JobSet replicatedJobs, Pod spec).
//     internal/jsonpatch (CarryOver) builds that patch.
//
// # Validation
//
// Queues against the governing policy's allowedQueues (unchanged queues are not judged again on
// UPDATE), lifecycle fields and annotations (integers, bounds, immutable once set, a warning for a
// TTL under a minute), and the shape of HyperJobs. Denials are 422 Invalid statuses with one cause
// per field, as the apiserver's own validation. Objects being deleted always pass.
//
// Handlers never write anything, so dry-run requests behave exactly like real ones (sideEffects:
// None). Every request is counted and timed (metrics.go) and logged with the request's logger.
//
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=hyperbatch.dev,resources=workloadpolicies,verbs=get;list;watch
package webhook
