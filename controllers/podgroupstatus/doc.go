// Package podgroupstatus gives the Volcano PodGroups that hyperbatch-scheduler serves the lifecycle
// Volcano's own scheduler gives its PodGroups: Pending → Inqueue (enqueue against the Volcano Queue),
// Running once minMember pods are bound, Completed when the members (or the owning Volcano Job) have
// finished, the running/succeeded/failed counts, and the Unschedulable and Scheduled conditions.
// Volcano's job controller creates a Volcano Job's pods only once the Job's PodGroup has left Pending,
// so without this controller a Volcano Job with schedulerName hyperbatch-scheduler never starts.
//
// Served PodGroups. A PodGroup is served when
//   - its controlling owner is a Volcano Job (batch.volcano.sh) whose spec.schedulerName is the
//     configured scheduler name (hyperbatch-scheduler); a PodGroup whose owning Job names another
//     scheduler is never served, whatever its pods say; or
//   - it has no owning Volcano Job (or that Job is gone) and at least one of its member pods (pods of
//     its namespace whose scheduling.k8s.io/group-name annotation names it) has that schedulerName.
//
// Everything else, notably the PodGroups of Volcano's own scheduler, is never written to. A PodGroup
// with neither an owning Job nor pods is left alone until its first pod appears.
//
// Enqueue. A served PodGroup leaves Pending for Inqueue when its Queue (spec.queue, "default" when
// empty) exists, is Open (an empty status.state, a Queue no queue controller has processed yet,
// counts as Open) and, if the Queue sets spec.capability, the prices of the Queue's Inqueue and
// Running PodGroups (of any scheduler) plus this PodGroup's price stay within it for every resource
// the capability names. A price is gangcontract.Price: minResources, raised for a Volcano Job's
// PodGroup to the effective requests of the Job's pods (a resource only in limits counts, as the
// pods will request it; Volcano's job controller leaves it out of minResources). Waiting PodGroups of one Queue are considered in the scheduler
// plugin's QueueSort order: priority (spec.priorityClassName), then creation time, then name. With
// the Queue's dequeueStrategy "traverse" (Volcano's default) a PodGroup that does not fit is skipped
// and younger ones may pass it; with "fifo" everything behind it waits too.
//
// Writes. Status is written with a JSON merge patch that carries only status and the resourceVersion
// read (optimistic lock), on the main resource when the PodGroup CRD has no status subresource
// (Volcano's upstream CRD) and on /status when it has one (found through discovery and re-checked
// when a write does not take). A reconcile whose computed status equals the stored one writes
// nothing; a change of the counts alone is written at most once per MinCountInterval per PodGroup.
package podgroupstatus
