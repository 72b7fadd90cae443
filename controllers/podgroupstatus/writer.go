package podgroupstatus

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// statusWriter writes PodGroup status whether or not the installed CRD has a status subresource.
// Volcano's upstream PodGroup CRD has none (status is part of the main resource); CRDs generated from
// volcano.sh/apis may have one, and then a write to the main resource silently drops status.
type statusWriter struct {
	c    client.Client
	disc discovery.DiscoveryInterface

	mu     sync.Mutex
	known  bool
	subres bool
}

// subresource reports whether podgroups/status is served, asking discovery once (again after reset).
func (w *statusWriter) subresource() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known {
		return w.subres, nil
	}
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	list, err := w.disc.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return false, fmt.Errorf("discovering %s (does the PodGroup CRD exist?): %w", gv, err)
	}
	w.subres = false
	for _, r := range list.APIResources {
		if r.Name == "podgroups/status" {
			w.subres = true
		}
	}
	w.known = true
	return w.subres, nil
}

func (w *statusWriter) reset() {
	w.mu.Lock()
	w.known = false
	w.mu.Unlock()
}

// write stores status on pg with a merge patch of status alone, guarded by pg's resourceVersion. On
// success pg holds the object the server returned.
func (w *statusWriter) write(ctx context.Context, pg *schedulingv1beta1.PodGroup, status schedulingv1beta1.PodGroupStatus) error {
	for attempt := 0; ; attempt++ {
		sub, err := w.subresource()
		if err != nil {
			return err
		}
		orig := pg.DeepCopy()
		mod := pg.DeepCopy()
		mod.Status = *status.DeepCopy()
		patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
		if sub {
			err = w.c.Status().Patch(ctx, mod, patch)
		} else {
			err = w.c.Patch(ctx, mod, patch)
		}
		switch {
		case err == nil && (sub || equality.Semantic.DeepEqual(mod.Status, status) || attempt > 0):
			if !sub && !equality.Semantic.DeepEqual(mod.Status, status) {
				return fmt.Errorf("PodGroup %s/%s: the API server stored no status from a patch of the main resource nor of /status", pg.Namespace, pg.Name)
			}
			*pg = *mod
			return nil
		case err == nil:
			// The main resource ignored status: the CRD gained a status subresource.
			log.FromContext(ctx).Info("PodGroup status was not stored through the main resource; checking for a status subresource")
			*pg = *mod
			w.reset()
		case sub && apierrors.IsNotFound(err) && attempt == 0:
			// No /status any more (the CRD lost its subresource), or the PodGroup is gone.
			w.reset()
		default:
			return err
		}
	}
}
