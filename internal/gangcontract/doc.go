// Package gangcontract is what hyperbatch-scheduler (scheduler-plugin/hypertopology) and the
// manager's PodGroup status controller (controllers/podgroupstatus) must agree on about gangs: the
// one gang order (QueueSort in the scheduler, enqueue admission in the controller, and which gangs
// count as "younger" or "lower" when the scheduler reclaims or preempts) and the PodGroup condition
// and Event reasons both write or read. It imports nothing of ours, so both sides may import it.
package gangcontract
