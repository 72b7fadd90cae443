package certs

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startWatches watches the Secret and each configured webhook configuration by name (a field selector
// on metadata.name, so RBAC can be limited with resourceNames) and pokes the sync loop on every event.
// Syncs are idempotent and cheap when nothing differs, so events caused by our own writes are harmless.
// Every (re)started watch first delivers the current object, which also triggers a sync.
func (r *Rotator) startWatches(ctx context.Context) {
	go r.watchLoop(ctx, "Secret "+r.secretRef(), &corev1.SecretList{},
		client.InNamespace(r.cfg.SecretNamespace), client.MatchingFields{"metadata.name": r.cfg.SecretName})
	for _, w := range r.webhookConfigs() {
		var list client.ObjectList = &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if w.kind == "MutatingWebhookConfiguration" {
			list = &admissionregistrationv1.MutatingWebhookConfigurationList{}
		}
		go r.watchLoop(ctx, w.kind+" "+w.name, list, client.MatchingFields{"metadata.name": w.name})
	}
}

// watchLoop keeps one watch open until ctx ends, re-opening it (after a pause) when it closes or fails.
func (r *Rotator) watchLoop(ctx context.Context, what string, list client.ObjectList, opts ...client.ListOption) {
	pause := time.Second
	for {
		w, err := r.client.Watch(ctx, list, opts...)
		if err != nil {
			r.log.V(1).Info("watch failed; the periodic resync still applies", "object", what, "error", err.Error())
			pause = min(2*pause, time.Minute)
		} else {
			pause = time.Second
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				r.poked()
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}
