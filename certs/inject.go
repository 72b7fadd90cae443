package certs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// caBundlePatch is a strategic-merge patch of a webhook configuration that names only the webhook
// entries (merge key: name) whose clientConfig.caBundle must change, and pins the resourceVersion that
// was read: it cannot touch any other field, and a concurrent edit makes it fail with a conflict (the
// next sync re-reads and retries) instead of resurrecting a removed entry.
type caBundlePatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Webhooks []caBundleEntry `json:"webhooks"`
}

type caBundleEntry struct {
	Name         string `json:"name"`
	ClientConfig struct {
		CABundle []byte `json:"caBundle"`
	} `json:"clientConfig"`
}

// webhookConfig is one named Mutating- or ValidatingWebhookConfiguration.
type webhookConfig struct {
	kind string
	name string
}

func (r *Rotator) webhookConfigs() []webhookConfig {
	var out []webhookConfig
	for _, n := range r.cfg.MutatingWebhookConfigurations {
		out = append(out, webhookConfig{kind: "MutatingWebhookConfiguration", name: n})
	}
	for _, n := range r.cfg.ValidatingWebhookConfigurations {
		out = append(out, webhookConfig{kind: "ValidatingWebhookConfiguration", name: n})
	}
	return out
}

// get reads the configuration and returns it with each entry's name and caBundle.
func (w webhookConfig) get(ctx context.Context, c client.Reader) (client.Object, map[string][]byte, []string, error) {
	var obj client.Object = &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if w.kind == "MutatingWebhookConfiguration" {
		obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
	}
	if err := c.Get(ctx, client.ObjectKey{Name: w.name}, obj); err != nil {
		return nil, nil, nil, fmt.Errorf("reading %s %s: %w", w.kind, w.name, err)
	}
	bundles := map[string][]byte{}
	var names []string
	add := func(name string, bundle []byte) {
		names = append(names, name)
		bundles[name] = bundle
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, h := range o.Webhooks {
			add(h.Name, h.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, h := range o.Webhooks {
			add(h.Name, h.ClientConfig.CABundle)
		}
	}
	return obj, bundles, names, nil
}

// inject makes every webhook entry of every configured webhook configuration trust bundle. A patch
// that loses a race (another replica or a user wrote in between) is retried on a fresh read. It
// returns the caBundles the entries hold afterwards as far as it knows (the bundle where it patched
// or found it, what it read where it could not patch), and an error naming each configuration it
// could not read or patch.
func (r *Rotator) inject(ctx context.Context, bundle []byte) ([][]byte, error) {
	var held [][]byte
	var errs []error
	for _, w := range r.webhookConfigs() {
		for attempt := 1; ; attempt++ {
			read, err := r.injectOne(ctx, w, bundle)
			if err == nil || !apierrors.IsConflict(err) || attempt == maxWriteAttempts {
				if err != nil {
					errs = append(errs, err)
					held = append(held, read...)
				} else {
					held = append(held, bundle)
				}
				break
			}
		}
	}
	return held, errors.Join(errs...)
}

// injectOne patches the stale entries of one configuration. On failure it also returns the caBundles
// it read.
func (r *Rotator) injectOne(ctx context.Context, w webhookConfig, bundle []byte) ([][]byte, error) {
	obj, bundles, names, err := w.get(ctx, r.client)
	if err != nil {
		return nil, err
	}
	var read [][]byte
	for _, n := range names {
		read = append(read, bundles[n])
	}
	patch := caBundlePatch{}
	patch.Metadata.ResourceVersion = obj.GetResourceVersion()
	var stale []string
	for _, n := range names {
		if bytes.Equal(bundles[n], bundle) {
			continue
		}
		e := caBundleEntry{Name: n}
		e.ClientConfig.CABundle = bundle
		patch.Webhooks = append(patch.Webhooks, e)
		stale = append(stale, n)
	}
	if len(stale) == 0 {
		return read, nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return read, fmt.Errorf("encoding caBundle patch for %s %s: %w", w.kind, w.name, err)
	}
	if err := r.client.Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return read, fmt.Errorf("patching caBundle of %s %s (webhooks %v): %w", w.kind, w.name, stale, err)
	}
	r.log.Info("injected CA bundle", "kind", w.kind, "name", w.name, "webhooks", stale)
	r.event(obj, ReasonCABundleInjected, fmt.Sprintf("set clientConfig.caBundle of webhooks %v from Secret %s", stale, r.secretRef()))
	return read, nil
}
