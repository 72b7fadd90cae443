package hypertopology

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// Event reasons on PodGroups (shared with the PodGroup status controller in gangcontract).
const (
	ReasonGangWaiting     = gangcontract.ReasonGangWaiting
	ReasonGangScheduled   = gangcontract.ReasonGangScheduled
	ReasonGangReleased    = gangcontract.ReasonGangReleased
	ReasonGangPartlyBound = gangcontract.ReasonGangPartlyBound
	ReasonGangPreempting  = gangcontract.ReasonGangPreempting
	ReasonGangPreempted   = gangcontract.ReasonGangPreempted
)

// recorder emits Events on PodGroups, at most one per gang, reason and message per minute: a
// waiting gang is retried often (once per member pod, and PreFilter and PostFilter may each report
// a different GangWaiting message on one attempt) and would otherwise flood the API server (and
// client-go's spam filter would then drop the Events that matter). The throttle remembers every
// message sent in the last minute, not only the last one per reason, so messages that alternate,
// within one reason or across reasons, each stay quiet.
type recorder struct {
	rec       events.EventRecorder
	logger    klog.Logger
	mu        sync.Mutex
	last      map[recordKey]time.Time // when each gang, reason and message was last sent
	lastSweep time.Time
	now       func() time.Time
}

type recordKey struct {
	gang   gang.Key
	reason string
	msg    string
}

const repeatAfter = time.Minute

func newRecorder(rec events.EventRecorder) *recorder {
	return &recorder{rec: rec, logger: klog.Background().WithValues("plugin", Name), last: map[recordKey]time.Time{}, now: time.Now}
}

// podGroupRef builds the Event's subject from the key and UID (typed PodGroups from an informer carry
// no apiVersion/kind, and the scheduler's event scheme does not know Volcano's types).
func podGroupRef(spec *gang.Spec) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "scheduling.volcano.sh/v1beta1", Kind: "PodGroup",
		Namespace: spec.Key.Namespace, Name: spec.Key.Name, UID: spec.UID}
}

// gang records an event on the gang's PodGroup; related is an optional pod.
func (r *recorder) gang(spec *gang.Spec, related *corev1.Pod, eventType, reason, msg string) {
	if r == nil || r.rec == nil || spec == nil {
		return
	}
	r.mu.Lock()
	now := r.now()
	r.sweepLocked(now)
	rk := recordKey{spec.Key, reason, msg}
	if at, ok := r.last[rk]; ok && now.Sub(at) < repeatAfter {
		r.mu.Unlock()
		return
	}
	r.last[rk] = now
	r.mu.Unlock()
	// Every gang decision (GangScheduled, GangPartlyBound) and wait reason (GangWaiting,
	// GangReleased) is an Event; logging it here, behind the same throttle, gives one log line per
	// Event at V(2) instead of one per scheduling attempt.
	r.logger.V(2).Info("Gang "+reason, "gang", spec.Key, "type", eventType, "message", msg)
	var rel *corev1.ObjectReference
	if related != nil {
		rel = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: related.Namespace, Name: related.Name, UID: related.UID}
	}
	if rel != nil {
		r.rec.Eventf(podGroupRef(spec), rel, eventType, reason, "Scheduling", "%s", msg)
	} else {
		r.rec.Eventf(podGroupRef(spec), nil, eventType, reason, "Scheduling", "%s", msg)
	}
}

// sweepLocked drops, at most once per repeatAfter, the entries that no longer throttle anything, so
// the map holds only the last minute's messages (messages carry counts that change).
func (r *recorder) sweepLocked(now time.Time) {
	if now.Sub(r.lastSweep) < repeatAfter {
		return
	}
	r.lastSweep = now
	for k, at := range r.last {
		if now.Sub(at) >= repeatAfter {
			delete(r.last, k)
		}
	}
}

func (r *recorder) forget(key gang.Key) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.last {
		if k.gang == key {
			delete(r.last, k)
		}
	}
}
