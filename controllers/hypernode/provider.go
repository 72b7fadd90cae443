// Package hypernode is the HyperNode discovery framework: it runs the configured providers, writes
// the HyperNode events they send to the API server (server-side apply, one field owner per source,
// with retries) and gives providers the helpers that turn a desired tree into the minimal events.
//
// Providers live in providers/<name>; the label, ibnetdiscover and ufm providers are compiled in and
// registered by name (providers.Builtin). docs/discovery.md is the operator's guide.
package hypernode

import (
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// SourceLabel marks a HyperNode as written by the discovery source named in its value. HyperNodes
// without it (hand-made) or with another value are never touched. The key is Volcano's.
const SourceLabel = hbv1.HyperNodeSourceLabel

// EventSource is the source component of discovery's Events (and the name of its logger).
const EventSource = "hypernode-discovery"

// Provider discovers one source's part of the HyperNode tree.
type Provider interface {
	// Name is the source name: the value of SourceLabel on every HyperNode it writes.
	Name() string
	// Start begins discovery. The provider sends events on eventCh; the framework writes them in
	// order and, only when a write still fails after its retries, sends the error on replyCh. The
	// informer is the framework's view of the HyperNodes (including its own completed writes).
	// Start returns once the provider runs; it must not block.
	Start(eventCh chan<- Event, replyCh <-chan Reply, informer HyperNodeInformer) error
	// Stop ends discovery; the provider sends no event after it returns.
	Stop() error
}

// EventType says what to do with a HyperNode.
type EventType string

// The event types.
const (
	EventCreate EventType = "Create"
	EventUpdate EventType = "Update"
	EventDelete EventType = "Delete"
)

// Event asks the framework to create, update or delete one HyperNode. For Create and Update,
// HyperNode is the complete desired object (name, labels, spec); for Delete it is the existing object
// (its UID guards the delete).
type Event struct {
	Type      EventType
	HyperNode *topologyv1alpha1.HyperNode
	// Round groups the events of one discovery round. When a write fails, the framework skips the
	// rest of that round, because later events of a round may depend on earlier ones (a parent
	// naming a child that was to be created first).
	Round uint64
}

// Reply reports an event whose write failed after the framework's retries. The rest of its round
// is skipped; the provider resends (its next round diffs again) or degrades.
type Reply struct {
	Event Event
	Err   error
}

// HyperNodeInformer is the framework's view of the cluster's HyperNodes: the watch cache with the
// framework's own completed writes laid over it, so a round that follows a write never repeats it.
//
//nolint:revive // the name is the one the provider interface is specified with
type HyperNodeInformer interface {
	// HasSynced reports whether the initial list has been received.
	HasSynced() bool
	// List returns the HyperNodes whose SourceLabel is source.
	List(source string) []*topologyv1alpha1.HyperNode
	// Get returns the HyperNode named name, whatever its source.
	Get(name string) (*topologyv1alpha1.HyperNode, bool)
	// Expect announces n events of source that are about to be sent; WaitIdle waits for them.
	Expect(source string, n int)
	// WaitIdle blocks until every announced event of source has been written, failed or skipped,
	// or until stop is closed.
	WaitIdle(source string, stop <-chan struct{}) bool
	// OnChange registers fn to be called after any HyperNode of any source changes (another
	// writer may have touched the tree).
	OnChange(fn func())
}
