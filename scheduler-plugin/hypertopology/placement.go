package hypertopology

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	vcclientset "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// PlacementWriteInterval is the least time between two writes of one gang's
// gangcontract.PlacementAnnotation: a waiting gang is retried every few seconds, its numbers change
// whenever another gang starts or ends, and the annotation is for people and tools, not for
// scheduling. So the cost is at most one PodGroup patch per waiting gang per interval, none while
// the numbers stay the same, and one to remove it when the gang is placed.
const PlacementWriteInterval = 10 * time.Second

// placementWriter writes gangs' placement annotations off the scheduling path: PreFilter only
// records the latest value; one goroutine patches the PodGroups. Its maps hold one entry per gang
// that waited, dropped when the PodGroup is deleted.
type placementWriter struct {
	client vcclientset.Interface
	queue  workqueue.TypedDelayingInterface[gang.Key]
	now    func() time.Time

	mu      sync.Mutex
	pending map[gang.Key]string // value to write ("" removes the annotation)
	written map[gang.Key]writtenPlacement
}

type writtenPlacement struct {
	value string // without its time, to compare
	at    time.Time
}

func newPlacementWriter(ctx context.Context, client vcclientset.Interface) *placementWriter {
	w := &placementWriter{client: client, now: time.Now,
		queue:   workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[gang.Key]{Name: "hypertopology-placement"}),
		pending: map[gang.Key]string{}, written: map[gang.Key]writtenPlacement{}}
	go w.run(ctx)
	go func() { <-ctx.Done(); w.queue.ShutDown() }()
	return w
}

// publish records why the gang waits; it is written unless the same numbers were written already.
func (w *placementWriter) publish(key gang.Key, p *gangcontract.Placement) {
	if w == nil || p == nil {
		return
	}
	cmp := *p
	cmp.Time = ""
	stable, err := cmp.Encode()
	if err != nil {
		return
	}
	now := w.now()
	p.Time = now.UTC().Format(time.RFC3339)
	value, err := p.Encode()
	if err != nil {
		return
	}
	w.mu.Lock()
	last, ok := w.written[key]
	if ok && last.value == stable {
		w.mu.Unlock()
		return
	}
	_, queued := w.pending[key]
	w.pending[key] = value
	w.mu.Unlock()
	if queued {
		return
	}
	delay := time.Duration(0)
	if ok {
		delay = max(PlacementWriteInterval-now.Sub(last.at), 0)
	}
	w.queue.AddAfter(key, delay)
}

// clear removes the annotation of a placed gang that carries one.
func (w *placementWriter) clear(key gang.Key) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if v, queued := w.pending[key]; queued && v == "" {
		w.mu.Unlock()
		return
	}
	_, queued := w.pending[key]
	w.pending[key] = ""
	delete(w.written, key)
	w.mu.Unlock()
	if !queued {
		w.queue.Add(key)
	}
}

// forget drops a deleted gang.
func (w *placementWriter) forget(key gang.Key) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.pending, key)
	delete(w.written, key)
	w.mu.Unlock()
}

func (w *placementWriter) run(ctx context.Context) {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.write(ctx, key)
		w.queue.Done(key)
	}
}

func (w *placementWriter) write(ctx context.Context, key gang.Key) {
	w.mu.Lock()
	value, ok := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	if !ok {
		return
	}
	var ann any = value
	if value == "" {
		ann = nil // JSON merge patch: remove
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gangcontract.PlacementAnnotation: ann}}})
	if err != nil {
		return
	}
	_, err = w.client.SchedulingV1beta1().PodGroups(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "hyperbatch-scheduler"})
	placementWrites.Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Could not write the gang's placement annotation", "plugin", Name, "gang", key, "err", err)
		// Try again with the next publish, not before the interval (a lasting error, such as a
		// missing patch permission, must not turn into a write per scheduling attempt).
		w.mu.Lock()
		w.written[key] = writtenPlacement{at: w.now()}
		w.mu.Unlock()
		return
	}
	if value == "" {
		return
	}
	var p gangcontract.Placement
	if json.Unmarshal([]byte(value), &p) == nil {
		p.Time = ""
		stable, _ := p.Encode()
		w.mu.Lock()
		w.written[key] = writtenPlacement{value: stable, at: w.now()}
		w.mu.Unlock()
	}
}
