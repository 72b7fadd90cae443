// Package enqueue holds watch-mapping helpers shared by hyperbatch's controllers.
package enqueue

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// All returns an event handler that, on any event of the watched kind, enqueues every object of the
// cluster-scoped kind listed by newList (read from the manager's cache). Use it when a change of one
// kind (a namespace, a policy) can concern any object of the other.
func All(c client.Reader, newList func() client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, trigger client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing objects to enqueue", "trigger", client.ObjectKeyFromObject(trigger))
			return nil
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			log.FromContext(ctx).Error(err, "reading the listed objects to enqueue")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName()}})
			}
		}
		return reqs
	})
}
