package topology

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// AddEventHandlers feeds the cache from a HyperNode informer and a Node informer, and makes the tree
// not ready until both have delivered their initial lists.
func (c *Cache) AddEventHandlers(hyperNodes, nodes cache.SharedInformer) error {
	hnReg, err := hyperNodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if hn, ok := obj.(*topologyv1alpha1.HyperNode); ok {
				c.AddOrUpdateHyperNode(hn)
			}
		},
		UpdateFunc: func(_, obj interface{}) {
			if hn, ok := obj.(*topologyv1alpha1.HyperNode); ok {
				c.AddOrUpdateHyperNode(hn)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if hn, ok := obj.(*topologyv1alpha1.HyperNode); ok {
				c.DeleteHyperNode(hn.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	nodeReg, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok {
				c.AddOrUpdateNode(n)
			}
		},
		UpdateFunc: func(_, obj interface{}) {
			if n, ok := obj.(*corev1.Node); ok {
				c.AddOrUpdateNode(n) // a no-op unless the labels changed
			}
		},
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.DeleteNode(n.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	c.SetSynced(func() bool { return hnReg.HasSynced() && nodeReg.HasSynced() })
	return nil
}
