package gangcontract

import "time"

// Order is a gang's place in the queue.
type Order struct {
	// Priority is the gang's pod priority (higher first).
	Priority int32
	// Created is the gang's time: its PodGroup's creation time (older first).
	Created time.Time
	// Namespace and Name break ties: the PodGroup's namespace, then its name.
	Namespace, Name string
}

// Before reports whether gang a is ordered before gang b: higher priority first, then the older
// gang, then by namespace and name. It is a strict weak order (irreflexive, transitive), total on
// distinct PodGroups.
func (a Order) Before(b Order) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
