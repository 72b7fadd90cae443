package hyperjob

import (
	"context"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// +kubebuilder:rbac:groups=cluster.karmada.io,resources=clusters,verbs=get;list;watch

// clusterEvents is the controller's one watch on Karmada's member Clusters. Two parts read them:
//
//   - member loss (memberloss.go) looks at every HyperJob again when a Cluster's Ready condition
//     changes or the Cluster goes: a child there is reported lost, or no longer lost;
//   - the auto split (autodecide.go) drops a member's cached numbers and decides the HyperJobs
//     waiting for a split again when a Cluster appears or its readiness, resourceSummary, served
//     children's kind (apiEnablements) or taints change: room may have appeared.
//
// Karmada's periodic status refreshes that change neither are ignored.
//
//	event                         member's numbers   HyperJobs enqueued
//	create                        dropped            waiting for a split
//	update: Ready changed         dropped            all (the waiting ones among them)
//	update: resourceSummary only  dropped            waiting for a split
//	update: child kind or taints  dropped            waiting for a split
//	update: anything else         kept               none
//	delete                        kept               all
func (r *Reconciler) clusterEvents() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, r.clusterChanged(ctx, e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, ok1 := e.ObjectOld.(*clusterv1alpha1.Cluster)
			n, ok2 := e.ObjectNew.(*clusterv1alpha1.Cluster)
			switch {
			case !ok1 || !ok2:
				add(q, r.allHyperJobs(ctx, e.ObjectNew))
			case clusterReady(o) != clusterReady(n):
				r.auto.forget(n.Name)
				add(q, r.allHyperJobs(ctx, n))
			case summaryChanged(o.Status.ResourceSummary, n.Status.ResourceSummary),
				memberLeftOut(o) != memberLeftOut(n):
				add(q, r.clusterChanged(ctx, n))
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, r.allHyperJobs(ctx, e.Object))
		},
	}
}

// clusterChanged drops the member's numbers and returns the HyperJobs waiting for an auto split.
func (r *Reconciler) clusterChanged(ctx context.Context, obj client.Object) []reconcile.Request {
	r.auto.forget(obj.GetName())
	return r.waitingHyperJobs(ctx, obj)
}

// summaryChanged reports whether a Cluster's allocatable, allocated or allocating changed.
func summaryChanged(o, n *clusterv1alpha1.ResourceSummary) bool {
	if (o == nil) != (n == nil) {
		return true
	}
	if o == nil {
		return false
	}
	return !resourceListEqual(o.Allocated, n.Allocated) || !resourceListEqual(o.Allocatable, n.Allocatable) ||
		!resourceListEqual(o.Allocating, n.Allocating)
}

func resourceListEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
