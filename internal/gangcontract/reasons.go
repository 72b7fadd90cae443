package gangcontract

// PodGroup reasons. The scheduler writes them as Events on PodGroups (and in the pods'
// PodScheduled=False messages); the PodGroup status controller writes GangWaiting and GangScheduled
// as the reasons of the PodGroup's Unschedulable and Scheduled conditions.
const (
	// ReasonGangWaiting: the gang cannot be placed yet (incomplete, no fitting HyperNode, tree
	// invalid, or waiting for the room its preemption clears).
	ReasonGangWaiting = "GangWaiting"
	// ReasonGangScheduled: minMember pods hold nodes; they are released for binding (scheduler), or
	// are bound (status controller).
	ReasonGangScheduled = "GangScheduled"
	// ReasonGangReleased: the gang's reservations were given up (timeout, failure, older gang, tree
	// change).
	ReasonGangReleased = "GangReleased"
	// ReasonGangPartlyBound: fewer than minMember pods are bound and none is in flight (a bind failed
	// after Permit, or the scheduler restarted mid-gang); the scheduler completes the gang.
	ReasonGangPartlyBound = "GangPartlyBound"
)
