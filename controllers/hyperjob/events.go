package hyperjob

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

// Events (docs/hyperjob.md, "Operation").
//
// client-go's recorder drops Events about an object beyond a burst of 25 per source and type
// (then 1 per 5 minutes). One Event per child action would spend that budget on the first 13
// children of a HyperJob, and the Events that matter (RecreatingJob, ChildJobsCompleted,
// ChildJobsFailed, a refusal) would vanish. So:
//
//   - a pass's child actions are summed up in one Event ("created 21 Volcano Jobs …"), and its
//     failures in one Warning per reason; each action is logged at V(2);
//   - these summaries come from their own source, eventSourceChildren, whose budget is separate
//     from the one of the HyperJob's own Events (source EventSource): however busy the children
//     are, RecreatingJob, ChildJobsCompleted, ChildJobsFailed and refusals are never dropped;
//   - the summaries are never folded together. client-go's EventAggregator merges Events with the
//     same source, involved object, type and reason (EventAggregatorByReasonFunc) once 10 with
//     different messages arrive within 10 minutes, into one "(combined from similar events)" Event
//     that keeps none of the messages. A HyperJob being scaled or rolled out has a summary per pass
//     under the same reason, so "deleted 8 Volcano Jobs" would be lost. The summaries' recorder
//     therefore aggregates by the message too (aggregateByMessage): two summaries are combined
//     only when they say the same thing, which the recorder's dedup counts instead ("count: 2").

// aggregateByMessage is client-go's EventAggregatorByReasonFunc with the message added to the
// aggregate key: Events that differ in their message are never folded together.
func aggregateByMessage(e *corev1.Event) (string, string) {
	key, local := record.EventAggregatorByReasonFunc(e)
	return key + "\x00" + e.Message, local
}

// newChildRecorder is the recorder of the per-pass summaries: source eventSourceChildren (a spam
// filter budget separate from the HyperJob's own Events) and aggregateByMessage. Its broadcaster
// is shut down when the manager stops.
func newChildRecorder(mgr ctrl.Manager) (record.EventRecorder, error) {
	events, err := corev1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("building the Events client of the HyperJob controller: %w", err)
	}
	b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{KeyFunc: aggregateByMessage}))
	b.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: events.Events("")})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		b.Shutdown()
		return nil
	})); err != nil {
		b.Shutdown()
		return nil, fmt.Errorf("registering the HyperJob Event broadcaster with the manager: %w", err)
	}
	return b.NewRecorder(mgr.GetScheme(), corev1.EventSource{Component: eventSourceChildren}), nil
}

// Reasons of the per-pass Events.
const (
	ReasonSyncedChildren = "SyncedChildren"
	ReasonRecreatingJob  = "RecreatingJob"
)

// Child actions a pass reports, in the order its Event names them.
const (
	actCreatedPP = iota
	actUpdatedPP
	actCreatedJob
	actDeletedJob
	actDeletedPP
	actDeletedOrphanPP
	actRecreatedJob
	numActions
)

// actionText is each action's sentence (%s: "3 Volcano Jobs") and the kind of child it acts on.
var actionText = [numActions][2]string{
	actCreatedPP:       {"created %s", "PropagationPolicy"},
	actUpdatedPP:       {"updated %s in place", "PropagationPolicy"},
	actCreatedJob:      {"created %s", "Volcano Job"},
	actDeletedJob:      {"deleted %s no longer in the spec", "Volcano Job"},
	actDeletedPP:       {"deleted %s no longer in the spec", "PropagationPolicy"},
	actDeletedOrphanPP: {"deleted %s whose finished Volcano Job is gone", "PropagationPolicy"},
	actRecreatedJob:    {"deleted %s to recreate from the changed template", "Volcano Job"},
}

// pass collects what one reconcile pass did to the children; safe for concurrent use (the slow-start
// batches run in parallel).
type pass struct {
	mu       sync.Mutex
	done     [numActions][]string
	failures map[string][]string // reason → messages
}

func newPass() *pass { return &pass{failures: map[string][]string{}} }

// did records a successful action on a child.
func (p *pass) did(ctx context.Context, act int, name string) {
	log.FromContext(ctx).V(2).Info(fmt.Sprintf(actionText[act][0], actionText[act][1]), "child", name)
	p.mu.Lock()
	p.done[act] = append(p.done[act], name)
	p.mu.Unlock()
}

// failed records a failed action (reason: the Event reason, e.g. FailedCreateJob).
func (p *pass) failed(ctx context.Context, reason, msg string) {
	log.FromContext(ctx).V(2).Info("child action failed", "reason", reason, "message", msg)
	p.mu.Lock()
	p.failures[reason] = append(p.failures[reason], msg)
	p.mu.Unlock()
}

// maxNamesInEvent bounds the child names one Event lists.
const maxNamesInEvent = 3

// summary is the pass's actions in one sentence, "" when it did nothing.
func (p *pass) summary() string {
	var parts []string
	for act, names := range p.done {
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		kind := actionText[act][1]
		if len(names) != 1 {
			kind = plural(kind)
		}
		shown := names[:min(len(names), maxNamesInEvent)]
		more := ""
		if len(names) > len(shown) {
			more = fmt.Sprintf(", … %d more", len(names)-len(shown))
		}
		what := fmt.Sprintf(actionText[act][0], fmt.Sprintf("%d %s", len(names), kind))
		parts = append(parts, fmt.Sprintf("%s (%s%s)", what, strings.Join(shown, ", "), more))
	}
	return strings.Join(parts, "; ")
}

func plural(kind string) string {
	if kind == "PropagationPolicy" {
		return "PropagationPolicies"
	}
	return kind + "s"
}

// report emits the pass's Events: one Normal summary and one Warning per failure reason, and logs
// the summary at info level.
func (p *pass) report(ctx context.Context, rec record.EventRecorder, hj *trainingv1alpha1.HyperJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.summary(); s != "" {
		log.FromContext(ctx).Info("synced children", "summary", s)
		rec.Event(hj, corev1.EventTypeNormal, ReasonSyncedChildren, s)
	}
	reasons := make([]string, 0, len(p.failures))
	for r := range p.failures {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		msgs := p.failures[reason]
		sort.Strings(msgs)
		msg := msgs[0]
		if len(msgs) > 1 {
			msg = fmt.Sprintf("%d children: %s (and %d more)", len(msgs), msgs[0], len(msgs)-1)
		}
		log.FromContext(ctx).Info("child actions failed", "reason", reason, "count", len(msgs), "first", msgs[0])
		rec.Event(hj, corev1.EventTypeWarning, reason, msg)
	}
}
