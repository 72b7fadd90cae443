package hypernode

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	topologylisters "volcano.sh/apis/pkg/client/listers/topology/v1alpha1"
)

// view implements HyperNodeInformer over a HyperNode informer. It lays the framework's completed
// writes over the watch cache until the watch delivers them, and counts the events each source has
// announced but not yet finished.
type view struct {
	lister topologylisters.HyperNodeLister
	synced cache.InformerSynced

	mu       sync.Mutex
	idle     *sync.Cond
	written  map[string]overlay // by name
	pending  map[string]int     // by source
	handlers []func()
}

// overlay is a write the watch has not delivered yet: the object the API server returned, or a
// deletion of the object with uid.
type overlay struct {
	obj     *topologyv1alpha1.HyperNode
	deleted types.UID
}

func newView(inf cache.SharedIndexInformer) (*view, error) {
	v := &view{
		lister:  topologylisters.NewHyperNodeLister(inf.GetIndexer()),
		synced:  inf.HasSynced,
		written: map[string]overlay{},
		pending: map[string]int{},
	}
	v.idle = sync.NewCond(&v.mu)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { v.observed(o, false) },
		UpdateFunc: func(_, o any) { v.observed(o, false) },
		DeleteFunc: func(o any) { v.observed(o, true) },
	})
	return v, err
}

// observed drops the overlay entry the watch has caught up with, then tells the handlers.
func (v *view) observed(o any, deleted bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	hn, ok := o.(*topologyv1alpha1.HyperNode)
	if !ok {
		return
	}
	v.mu.Lock()
	if w, ok := v.written[hn.Name]; ok {
		switch {
		case deleted && (w.deleted == hn.UID || (w.obj != nil && w.obj.UID == hn.UID)):
			delete(v.written, hn.Name)
		case !deleted && w.obj == nil:
			// Created again after our delete (by anyone): the watch now knows better.
			delete(v.written, hn.Name)
		case !deleted && !olderThan(hn.ResourceVersion, w.obj.ResourceVersion):
			delete(v.written, hn.Name)
		}
	}
	handlers := v.handlers
	v.mu.Unlock()
	for _, fn := range handlers {
		fn()
	}
}

// olderThan compares resource versions; etcd's are numbers. Anything unparsable counts as not older,
// which only lets the watch cache win earlier.
func olderThan(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

func (v *view) HasSynced() bool { return v.synced() }

func (v *view) List(source string) []*topologyv1alpha1.HyperNode {
	sel := labels.SelectorFromSet(labels.Set{SourceLabel: source})
	cached, _ := v.lister.List(sel)
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*topologyv1alpha1.HyperNode, 0, len(cached)+len(v.written))
	for _, hn := range cached {
		if _, over := v.written[hn.Name]; !over {
			out = append(out, hn)
		}
	}
	for _, w := range v.written {
		if w.obj != nil && w.obj.Labels[SourceLabel] == source {
			out = append(out, w.obj)
		}
	}
	return out
}

func (v *view) Get(name string) (*topologyv1alpha1.HyperNode, bool) {
	v.mu.Lock()
	w, over := v.written[name]
	v.mu.Unlock()
	if over {
		return w.obj, w.obj != nil
	}
	hn, err := v.lister.Get(name)
	return hn, err == nil
}

func (v *view) Expect(source string, n int) {
	v.mu.Lock()
	v.pending[source] += n
	if v.pending[source] <= 0 {
		delete(v.pending, source)
		v.idle.Broadcast()
	}
	v.mu.Unlock()
}

// done marks one announced event of source finished.
func (v *view) done(source string) { v.Expect(source, -1) }

func (v *view) WaitIdle(source string, stop <-chan struct{}) bool {
	// sync.Cond cannot select on stop: a helper goroutine wakes the waiter when stop closes.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-stop:
			v.mu.Lock()
			v.idle.Broadcast()
			v.mu.Unlock()
		case <-finished:
		}
	}()
	v.mu.Lock()
	defer v.mu.Unlock()
	for v.pending[source] > 0 {
		select {
		case <-stop:
			return false
		default:
		}
		v.idle.Wait()
	}
	select {
	case <-stop:
		return false
	default:
		return true
	}
}

func (v *view) OnChange(fn func()) {
	v.mu.Lock()
	v.handlers = append(v.handlers, fn)
	v.mu.Unlock()
}

// wrote records a completed apply (obj as returned by the API server) or delete.
func (v *view) wrote(name string, obj *topologyv1alpha1.HyperNode, deletedUID types.UID) {
	v.mu.Lock()
	v.written[name] = overlay{obj: obj, deleted: deletedUID}
	v.mu.Unlock()
}
