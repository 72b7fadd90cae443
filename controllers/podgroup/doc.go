// Package podgroup is the JobSet gang controller: it gives a JobSet that is a gang one Volcano PodGroup of the same name: minMember from
// the replicatedJobs (or Volcano's group-min-member annotation), minResources as the apiserver would
// admit the pods (LimitRange defaults, the KEP-753 effective-request rule, RuntimeClass overhead),
// following the pods that exist (a pod keeps the requests it was admitted with: PriceFollowingPods),
// and queue, priorityClassName and networkTopology from the JobSet or the WorkloadPolicy defaults
// engine. The PodGroup is written by server-side apply (field owner hyperbatch-podgroup), only when
// it differs from what is wanted; it does not exist while the JobSet is suspended and is deleted as
// soon as the JobSet is Completed or Failed.
package podgroup
