package hypernode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	topologyac "volcano.sh/apis/pkg/client/applyconfiguration/topology/v1alpha1"
	topologyclient "volcano.sh/apis/pkg/client/clientset/versioned/typed/topology/v1alpha1"
)

// FieldOwner is the server-side apply field manager of source's writes: one per source, so two
// sources never take each other's fields.
func FieldOwner(source string) string { return "hyperbatch-discovery-" + source }

// writeBackoff is the retry schedule of one write: 5 tries over about 3 s.
var writeBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1}

// errNotOurs refuses a write to a HyperNode that lacks the source's label.
var errNotOurs = errors.New("the HyperNode exists without this source's label " + SourceLabel + "; discovery never touches it")

// writer writes one source's events in order.
type writer struct {
	source string
	client topologyclient.HyperNodeInterface
	view   *view
	log    logr.Logger
	// backoff is writeBackoff; tests shorten it.
	backoff wait.Backoff
}

// run writes events until eventCh closes or ctx ends. A failed write is replied (when the provider
// has room on replyCh) and the rest of its round is skipped.
func (w *writer) run(ctx context.Context, eventCh <-chan Event, replyCh chan<- Reply) {
	var failedRound uint64
	for {
		var ev Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-eventCh:
			if !ok {
				return
			}
		}
		if ev.HyperNode == nil {
			w.view.done(w.source)
			continue
		}
		if failedRound != 0 && ev.Round == failedRound {
			writesTotal.WithLabelValues(w.source, string(ev.Type), "skipped").Inc()
			w.view.done(w.source)
			continue
		}
		err := w.write(ctx, ev)
		if err != nil {
			failedRound = ev.Round
			w.log.Error(err, "HyperNode write failed after retries; the rest of the round is skipped", "type", ev.Type, "hyperNode", ev.HyperNode.Name, "round", ev.Round)
			select {
			case replyCh <- Reply{Event: ev, Err: err}:
			default:
				w.log.Info("reply channel full; the provider misses this error", "hyperNode", ev.HyperNode.Name)
			}
		}
		w.view.done(w.source)
	}
}

// write performs one event with retries.
func (w *writer) write(ctx context.Context, ev Event) error {
	start := time.Now()
	err := retry.OnError(w.backoff, retriable, func() error { return w.writeOnce(ctx, ev) })
	result := "ok"
	if err != nil {
		result = "error"
	}
	writesTotal.WithLabelValues(w.source, string(ev.Type), result).Inc()
	writeSeconds.WithLabelValues(w.source).Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("%s HyperNode %s: %w", ev.Type, ev.HyperNode.Name, err)
	}
	w.log.V(1).Info("wrote HyperNode", "type", ev.Type, "hyperNode", ev.HyperNode.Name, "tier", ev.HyperNode.Spec.Tier, "members", len(ev.HyperNode.Spec.Members))
	return nil
}

func retriable(err error) bool {
	return !errors.Is(err, errNotOurs) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) &&
		!apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) && !errors.Is(err, context.Canceled)
}

func (w *writer) writeOnce(ctx context.Context, ev Event) error {
	hn := ev.HyperNode
	cur, exists := w.view.Get(hn.Name)
	if exists && cur.Labels[SourceLabel] != w.source {
		return errNotOurs
	}
	if ev.Type == EventDelete {
		if !exists {
			return nil
		}
		uid := cur.UID
		err := w.client.Delete(ctx, hn.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		w.view.wrote(hn.Name, nil, uid)
		return nil
	}
	if hn.Labels[SourceLabel] != w.source {
		return fmt.Errorf("the event's HyperNode carries %s=%q, not %q", SourceLabel, hn.Labels[SourceLabel], w.source)
	}
	got, err := w.client.Apply(ctx, applyConfiguration(hn), metav1.ApplyOptions{FieldManager: FieldOwner(w.source), Force: true})
	if err != nil {
		return err
	}
	w.view.wrote(hn.Name, got, "")
	return nil
}

// applyConfiguration is the server-side apply request for hn: its labels, tier, tier name and
// exact-name members, nothing else.
func applyConfiguration(hn *topologyv1alpha1.HyperNode) *topologyac.HyperNodeApplyConfiguration {
	spec := topologyac.HyperNodeSpec().WithTier(hn.Spec.Tier)
	if hn.Spec.TierName != "" {
		spec.WithTierName(hn.Spec.TierName)
	}
	for _, m := range hn.Spec.Members {
		// Build only names members exactly.
		sel := topologyac.MemberSelector()
		if m.Selector.ExactMatch != nil {
			sel.WithExactMatch(topologyac.ExactMatch().WithName(m.Selector.ExactMatch.Name))
		}
		spec.WithMembers(topologyac.MemberSpec().WithType(m.Type).WithSelector(sel))
	}
	return topologyac.HyperNode(hn.Name).WithLabels(hn.Labels).WithSpec(spec)
}
