package podgroup

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Price is a gang's minResources as its pods ask for it (PriceFollowingPods).
type Price struct {
	// MinResources is the sum over the gang's members: an existing pod's own effective request, and
	// for a member with no pod yet the request the current LimitRange defaults and RuntimeClass
	// overhead give its template. Nil when every quantity is zero.
	MinResources corev1.ResourceList
	// FromInputs is the price of every member from the current inputs alone (MinResources).
	FromInputs corev1.ResourceList
	// Existing counts the members priced by an existing pod's requests; Missing those priced from
	// the current inputs.
	Existing, Missing int
	// Differing counts the existing pods whose effective request differs from what the current
	// inputs give their template: they were admitted with other LimitRange defaults or RuntimeClass
	// overhead (or were created from another template).
	Differing int
}

// FollowsOldInputs says whether the price differs from the current inputs' because existing pods
// were admitted with other ones.
func (p Price) FollowsOldInputs() bool { return p.Differing > 0 }

// PriceFollowingPods is the gang's minResources following the pods that exist: they were admitted
// with the LimitRange defaults and RuntimeClass overhead of their creation and keep their requests,
// and the members with no pod yet will be admitted with the current ones. Per replicatedJob, the
// members are replicas × min(parallelism, completions) (as MinResources); its active pods (not being
// deleted, not Succeeded or Failed; the oldest first when there are more than members) are priced
// by their own effective request (pod spec, the KEP-753 rule, overhead), and each member left
// without a pod at the request the current inputs give the template. So the price is exactly what
// the members ask, whatever mix of old and new pods exists (a resume racing a LimitRange change):
// it never makes the gang wait for capacity its pods never ask for, nor promise less than they ask.
// pods are the JobSet's pods (label jobset.sigs.k8s.io/jobset-name); pods of another JobSet, of an
// earlier JobSet of the same name (jobset-uid label) or of no replicatedJob are ignored. An error
// (an unknown RuntimeClass) is MinResources's.
func PriceFollowingPods(js *jobsetv1alpha2.JobSet, a Admission, pods []*corev1.Pod) (Price, error) {
	fromInputs, err := MinResources(js, a)
	if err != nil {
		return Price{}, err
	}
	byJob := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if !memberOf(js, p) || !active(p) {
			continue
		}
		rj := p.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
		byJob[rj] = append(byJob[rj], p)
	}
	price := Price{FromInputs: fromInputs}
	total := corev1.ResourceList{}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		n := replicas(rj) * podsAtOnce(rj)
		if n <= 0 {
			continue
		}
		// MinResources succeeded, so the template's request does too.
		per, err := a.PodRequests(&rj.Template.Spec.Template)
		if err != nil {
			return Price{}, fmt.Errorf("spec.replicatedJobs[%d] (%s).template.spec.template.spec.%w", i, rj.Name, err)
		}
		have := byJob[rj.Name]
		sort.Slice(have, func(x, y int) bool {
			tx, ty := have[x].CreationTimestamp, have[y].CreationTimestamp
			if !tx.Equal(&ty) {
				return tx.Before(&ty)
			}
			return have[x].Name < have[y].Name
		})
		if int64(len(have)) > n {
			have = have[:n]
		}
		for _, p := range have {
			own := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
			if !sameNonZero(own, per) {
				price.Differing++
			}
			addResources(total, own, 1)
		}
		missing := n - int64(len(have))
		addResources(total, per, missing)
		price.Existing += len(have)
		price.Missing += int(missing)
	}
	if len(total) > 0 {
		price.MinResources = total
	}
	return price, nil
}

// memberOf says whether pod p was made for JobSet js: its jobset-name label, and its jobset-uid
// label when it has one (a pod of an earlier JobSet of the same name is not).
func memberOf(js *jobsetv1alpha2.JobSet, p *corev1.Pod) bool {
	if p.Namespace != js.Namespace || p.Labels[jobsetv1alpha2.JobSetNameKey] != js.Name {
		return false
	}
	uid, ok := p.Labels[jobsetv1alpha2.JobSetUIDKey]
	return !ok || js.UID == "" || uid == string(js.UID)
}

// active says whether the pod still asks for its requests: not being deleted, not finished.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp.IsZero() && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// addResources adds n × each non-zero quantity of add to total.
func addResources(total, add corev1.ResourceList, n int64) {
	if n <= 0 {
		return
	}
	for name, q := range add {
		if q.IsZero() {
			continue
		}
		v := q.DeepCopy()
		v.Mul(n)
		sum := total[name]
		sum.Add(v)
		total[name] = sum
	}
}

// sameNonZero compares two resource lists, a zero quantity counting as absent.
func sameNonZero(a, b corev1.ResourceList) bool {
	for name, q := range a {
		o := b[name]
		if q.Cmp(o) != 0 {
			return false
		}
	}
	for name, q := range b {
		if _, ok := a[name]; !ok && !q.IsZero() {
			return false
		}
	}
	return true
}

// podJobSetIndex indexes the manager's cached pods by their jobset-name label, so a gang's pods are
// read in proportion to the gang, not the namespace.
const podJobSetIndex = "hyperbatch.dev/podgroup-jobset"

func indexPodJobSet(o client.Object) []string {
	if n := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]; n != "" {
		return []string{n}
	}
	return nil
}

// gangPods reads the JobSet's pods from the manager's cache (the podJobSetIndex: the JobSet's own
// pods, never a list of the namespace).
func (r *Reconciler) gangPods(ctx context.Context, js *jobsetv1alpha2.JobSet) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingFields{podJobSetIndex: js.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pods of JobSet %s/%s: %w", js.Namespace, js.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if memberOf(js, &list.Items[i]) {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// gangStarted says whether any of the JobSet's pods is active (gangPods).
func (r *Reconciler) gangStarted(ctx context.Context, js *jobsetv1alpha2.JobSet) (bool, error) {
	pods, err := r.gangPods(ctx, js)
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		if active(p) {
			return true, nil
		}
	}
	return false, nil
}

// podChanges passes the pod events that can change a gang's price: a pod created or deleted, one
// that stops asking for its requests (deletion started, Succeeded or Failed), or an active pod whose
// own effective request changed (an in-place resize through pods/resize). Status and other updates
// of a pod that stays active with the same requests do not enqueue its JobSet: the requests are
// compared only when the pod's spec may have changed (metadata.generation moved, or is not kept).
var podChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 || n.Labels[jobsetv1alpha2.JobSetNameKey] == "" {
			return false // podEvents would enqueue nothing for a pod of no JobSet
		}
		if active(o) != active(n) {
			return true
		}
		if !active(n) || (o.Generation != 0 && o.Generation == n.Generation) {
			return false
		}
		return !sameNonZero(resourcehelper.PodRequests(o, resourcehelper.PodResourcesOptions{}),
			resourcehelper.PodRequests(n, resourcehelper.PodResourcesOptions{}))
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// PodEventBatch is how long a pod event (podChanges) waits before its JobSet is priced again, so the
// events of a gang's pods created, finished or deleted together make one pass, not one each: a pass
// reads and prices every pod of the gang (about 50 ms at 10,000 pods), and one pass a pod would keep
// the controller's worker busy for as long as the pods come and go.
const PodEventBatch = time.Second

// podEvents enqueues a pod's JobSet (its jobset-name label) PodEventBatch after the event; the
// events of one JobSet within that time make one request.
var podEvents = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueJobSetOf(e.Object, q)
	},
	UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueJobSetOf(e.ObjectNew, q)
	},
	DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueueJobSetOf(e.Object, q)
	},
}

func enqueueJobSetOf(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if n := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]; n != "" {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: n}}, PodEventBatch)
	}
}
