// Package defaults is hyperbatch's one defaulting engine. The mutating webhook and the HyperJob
// controller both call it, so a workload is defaulted the same way whichever path it takes.
//
// The package is pure: no clients, no I/O, no mutable package state. Build a [Policies] from the cluster's
// WorkloadPolicies once (selectors are parsed then), describe the workload's namespace with a
// [Namespace], and call the function for the kind: [Pod], [VolcanoJob], [PodGroup], [JobSet],
// [HyperJob] or [PropagationPolicy]. Each mutates the object in place and returns a [Result].
//
// A [Result] lists every field the call filled as a [Fill]: its path in the object, the default's
// short name (FieldQueue ...) and its [Source] (the governing policy, the namespace's queue
// annotation, or a JobSet's own queue). The webhook builds its patch-side bookkeeping and its
// warning from the Fills alone, so adding a default is one call of record (or a fill helper) in the
// kind function, plus its short name in keys.go.
//
// # Which policy
//
// The governing policy is the matching WorkloadPolicy with the highest spec.weight; among equal
// weights the lexically smallest name (byte order) wins. A nil or empty namespaceSelector matches
// every namespace. Namespace labels are matched as given, plus kubernetes.io/metadata.name set to
// the namespace name when the caller left it out (the apiserver always sets it on real Namespaces).
//
// # Never overwrite
//
// A default is written only where the workload leaves the field unset, and a filled field is never
// changed again, so applying the engine twice changes nothing. "Unset" means the empty value
// (empty string, nil pointer, empty list, absent annotation), with these deliberate exceptions:
//
//   - spec.queue of Volcano Jobs, PodGroups and HyperJob templates: Volcano's own "default" queue
//     also counts as unset. The PodGroup CRD defaults an omitted queue to "default" before admission
//     webhooks run, and Volcano's job webhook writes "default" for an empty queue, so by the time we
//     see it "default" is indistinguishable from "not chosen". Volcano's own PodGroup webhook already
//     replaces "default" with the namespace annotation; we follow it. "namespace/default" is an
//     explicit choice and is kept. Queue annotations (Pods, JobSets) have no upstream default, so
//     there only an absent or blank annotation is unset.
//   - Pod spec.schedulerName: "" is unset, and so is "default-scheduler" when the governing policy
//     names a scheduler other than "default-scheduler". The apiserver applies its defaults while
//     decoding a request, before admission, so a bare Pod that omitted schedulerName reaches the
//     webhook as "default-scheduler"; were only "" unset, a policy's scheduler would never reach a
//     bare Pod. The price: a Pod that names "default-scheduler" explicitly, in a namespace whose
//     policy sets another scheduler, is moved to the policy's scheduler too (the two cannot be told
//     apart). Pod templates inside CRDs (JobSet, Volcano Job tasks) are not defaulted by the
//     apiserver, so there only "" is unset and an explicit "default-scheduler" is kept.
//   - Pod spec.priorityClassName: filled when "". Because the in-tree Priority admission plugin runs
//     before webhooks and has already computed spec.priority (and preemptionPolicy) from "no class",
//     filling the class also clears those two fields; otherwise a reinvoked Priority plugin rejects
//     the Pod, or it keeps the stale priority. The webhook sets them from the PriorityClass.
//     In pod templates (JobSet) the class is filled only when spec.priority is also unset.
//   - Network topology is one unit: it is filled only when the workload has none at all
//     (networkTopology nil; on Pods neither volcano.sh/network-topology-* annotation present).
//     A policy mode of "" is written as "hard", the API default. Pods carry the limit as annotations
//     that only hold a numeric tier, so a policy that names the tier (highestTierName) sets no
//     topology on Pods; gang objects (Volcano Job, PodGroup, HyperJob templates) get it natively.
//   - PropagationPolicy spec.propagateDeps is a plain bool: false is "unset", so only a policy's
//     true is written. clusterNames is filled only when the placement has no clusterAffinities and
//     its clusterAffinity selects nothing yet (no clusterNames, labelSelector or fieldSelector).
//
// # Coherent defaults, and pods that are never defaulted
//
// A default that would contradict what the workload itself says is left out and reported in
// [Result].Skips, each naming the default and the user's field (coherence.go): a cluster spread
// cap below the number of clusters the PropagationPolicy names for its replicas (a Weighted
// staticWeightList, or Duplicated clusterNames), and a network-topology tier bound on a workload
// that pins its pods to nodes (nodeName, a hostname nodeSelector, a required node affinity naming
// nodes), and a Volcano Job's (or HyperJob template's) Job-level schedulerName when a task template
// names another scheduler. The webhook warns about each Skip on CREATE. DaemonSet pods and static pods' mirrors are
// never defaulted: they belong to the node, not to a batch workload.
//
// # Queues
//
// Precedence: the workload's own value > the namespace annotation scheduling.volcano.sh/queue-name
// (applied even when no policy matches, as Volcano does for PodGroups) > the governing policy's
// defaults.queue. Queue references follow Volcano's grammar: "<name>" is the cluster-scoped Queue
// <name>; "namespace/<name>" is the NamespaceQueue <name> in the workload's own namespace, where
// "namespace/" names the kind of queue, not a namespace. The two are different queues, so
// [NormalizeQueue] keeps the prefix and only canonicalises spacing; [AllowedQueue] compares
// normalised references, and a policy's "namespace/batch" default gives every governed namespace
// its own "batch" NamespaceQueue. Other forms with a "/" are kept verbatim and match only themselves.
//
// # The defaulted-by annotation
//
// Every object the engine changes gets hyperbatch.dev/defaulted-by, which lists where each filled
// field came from:
//
//	<source>/<field>,<field>[;<source>/<field>,...]
//
// e.g. "team-a/queue,priorityClassName,networkTopology" or
// "namespace:ml/queue;gpu-default/priorityClassName,networkTopology". A source is a WorkloadPolicy
// name, or one of two forms that contain ':' and so can never be a policy name:
//
//   - "namespace:<namespace>": copied from the namespace's scheduling.volcano.sh/queue-name.
//   - "jobset:<name>": a JobSet's own queue annotation copied into its pod templates.
//
// Field names are the short names in keys.go (FieldQueue ...), in that fixed order within a source;
// sources keep the order they first appeared in. On reinvocation or UPDATE the new fields are merged
// into the existing value, so history is never lost; a call that fills nothing leaves the
// annotation, and the whole object, untouched.
package defaults
