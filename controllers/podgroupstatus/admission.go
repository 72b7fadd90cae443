package podgroupstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// verdict is the enqueue decision for one gang.
type verdict struct {
	admit bool
	// reason and message explain a refusal (condition and Event), or the admission (Event).
	reason, message string
}

// candidate is a gang waiting for enqueue.
type candidate struct {
	key      types.NamespacedName
	priority int32
	created  time.Time
	// min is the gang's price (gangcontract.Price); stated is its spec.minResources, named in a
	// refusal where the price differs from it.
	min, stated corev1.ResourceList
}

// queueOrder sorts the candidates in the scheduler plugin's QueueSort order for gangs
// (gangcontract.Order: higher priority, then older, then by key).
func queueOrder(c []candidate) {
	sort.SliceStable(c, func(i, j int) bool { return c[i].order().Before(c[j].order()) })
}

func (c candidate) order() gangcontract.Order {
	return gangcontract.Order{Priority: c.priority, Created: c.created, Namespace: c.key.Namespace, Name: c.key.Name}
}

// queueOpen says whether a Queue accepts new gangs: status.state Open, or empty (no queue controller
// has processed the Queue yet; Volcano's queue controller sets Open on its first sync).
func queueOpen(q *schedulingv1beta1.Queue) bool {
	return q.Status.State == schedulingv1beta1.QueueStateOpen || q.Status.State == ""
}

// admitQueue decides, in queue order, which waiting gangs of one queue may be enqueued. q is nil when
// the queue does not exist; reserved is what the queue's Inqueue and Running gangs reserve (their
// minResources). The candidates are sorted in place.
func admitQueue(queueName string, q *schedulingv1beta1.Queue, reserved corev1.ResourceList, cands []candidate) map[types.NamespacedName]verdict {
	return admitQueueFor(queueName, q, reserved, cands, nil)
}

// admitQueueFor is admitQueue; when only is set, the result holds only that gang's verdict (a
// reconcile needs just its own, and building every gang's message would cost O(queue) per gang).
func admitQueueFor(queueName string, q *schedulingv1beta1.Queue, reserved corev1.ResourceList, cands []candidate, only *types.NamespacedName) map[types.NamespacedName]verdict {
	out := make(map[types.NamespacedName]verdict, len(cands))
	if q == nil {
		for _, c := range cands {
			out[c.key] = verdict{reason: ReasonQueueNotFound, message: fmt.Sprintf(
				"queue %q (spec.queue) does not exist: create the Volcano Queue or set spec.queue to an existing one", queueName)}
		}
		return out
	}
	if !queueOpen(q) {
		for _, c := range cands {
			out[c.key] = verdict{reason: ReasonQueueClosed, message: fmt.Sprintf(
				"queue %q is %s (status.state): it accepts no new gangs until it is Open again", queueName, q.Status.State)}
		}
		return out
	}
	queueOrder(cands)
	used := reserved.DeepCopy()
	if used == nil {
		used = corev1.ResourceList{}
	}
	fifo := q.Spec.DequeueStrategy == schedulingv1beta1.DequeueStrategyFIFO
	var blockedBy *candidate
	for i := range cands {
		c := &cands[i]
		mine := only == nil || *only == c.key
		if blockedBy != nil {
			if !mine {
				continue
			}
			out[c.key] = verdict{reason: ReasonQueueFIFO, message: fmt.Sprintf(
				"queue %q is fifo (spec.dequeueStrategy): waiting behind gang %s, which does not fit its capability", queueName, blockedBy.key)}
			continue
		}
		if !fits(q.Spec.Capability, used, c.min) {
			if mine {
				out[c.key] = verdict{reason: ReasonQueueCapabilityExceeded, message: fmt.Sprintf(
					"queue %q capability exceeded: %s", queueName, exceeds(q.Spec.Capability, used, c.min, c.stated))}
			}
			if fifo {
				blockedBy = c
			}
			continue
		}
		for name, qty := range c.min {
			if _, limited := q.Spec.Capability[name]; !limited {
				continue
			}
			sum := used[name]
			sum.Add(qty)
			used[name] = sum
		}
		if mine {
			out[c.key] = verdict{admit: true, reason: ReasonEnqueued, message: admittedMessage(queueName, q.Spec.Capability, used)}
		}
	}
	return out
}

// fits says whether used+min stays within capability for every resource the capability names.
func fits(capability, used, min corev1.ResourceList) bool {
	for name, limit := range capability {
		want, ok := min[name]
		if !ok || want.IsZero() {
			continue
		}
		have := used[name]
		total := have.DeepCopy() // Add may change a shared inf.Dec
		total.Add(want)
		if total.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

// exceeds returns a description of every capability resource that used+min would exceed ("" when
// the gang fits). Resources the capability does not name are unlimited, as in Volcano. stated is the
// gang's spec.minResources: where it has less than min (a Volcano Job whose templates set the
// resource only in limits), the message says where the rest comes from.
func exceeds(capability, used, min, stated corev1.ResourceList) string {
	var parts []string
	for _, name := range sortedNames(capability) {
		want, ok := min[name]
		if !ok || want.IsZero() {
			continue
		}
		limit := capability[name]
		have := used[name]
		total := have.DeepCopy()
		total.Add(want)
		if total.Cmp(limit) > 0 {
			mine := fmt.Sprintf("this gang's minResources %s", qtyString(want))
			if s := stated[name]; s.Cmp(want) < 0 {
				mine = fmt.Sprintf("this gang's pods request %s (its minResources has %s: the Volcano Job's pod templates set the rest only in limits, which Kubernetes makes the request)",
					qtyString(want), qtyString(s))
			}
			parts = append(parts, fmt.Sprintf("%s: Inqueue and Running gangs reserve %s, %s, total %s > capability %s",
				name, qtyString(have), mine, qtyString(total), qtyString(limit)))
		}
	}
	return strings.Join(parts, "; ")
}

func admittedMessage(queueName string, capability, used corev1.ResourceList) string {
	if len(capability) == 0 {
		return fmt.Sprintf("admitted to queue %q (no capability set)", queueName)
	}
	var parts []string
	for _, name := range sortedNames(capability) {
		parts = append(parts, fmt.Sprintf("%s %s of %s", name, qtyString(used[name]), qtyString(capability[name])))
	}
	return fmt.Sprintf("admitted to queue %q; reserved now %s", queueName, strings.Join(parts, ", "))
}

// addResources adds b into a (allocating a when nil) and returns a.
func addResources(a, b corev1.ResourceList) corev1.ResourceList {
	if a == nil {
		a = corev1.ResourceList{}
	}
	for name, q := range b {
		sum := a[name]
		sum.Add(q)
		a[name] = sum
	}
	return a
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

func qtyString(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}
