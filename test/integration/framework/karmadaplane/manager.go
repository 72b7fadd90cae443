package karmadaplane

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/localproc"
	"github.com/hyperbatch/hyperbatch/webhook"
)

// Manager is hyperbatch's manager binary (bin/manager) running in control-plane mode against the
// plane, started as `make run-multicluster` starts it (localproc.Hyperbatch for a cluster of role
// karmada): the HyperJob, lifecycle and WorkloadPolicy controllers, and the HyperJob, VolcanoJob and
// PropagationPolicy webhooks, registered by the manager on the Karmada apiserver in URL mode with
// its own CA, serving certificate and caBundle.
type Manager struct {
	Process *framework.Process
	plane   *Plane
}

// StartManager starts the manager process and returns once its /readyz passes (webhooks
// registered and served, caches synced). Its log is <Dir>/logs/manager.log.
func (p *Plane) StartManager(ctx context.Context) (*Manager, error) {
	stage, err := localproc.Hyperbatch(p.Cluster, p.bin, localproc.HyperbatchOptions{})
	if err != nil {
		return nil, err
	}
	if len(stage) != 1 {
		return nil, fmt.Errorf("a Karmada plane runs hyperbatch's manager only, got %d components", len(stage))
	}
	proc, err := localproc.StartReady(ctx, stage[0], localproc.StartOptions{Process: p.Cluster.Process(stage[0].Name), LogPath: p.Cluster.LogFile(stage[0].Name)})
	if err != nil {
		return nil, fmt.Errorf("hyperbatch's manager in control-plane mode: %w", err)
	}
	return &Manager{Process: proc, plane: p}, nil
}

// Stop ends the process and removes the webhook configurations it registered on the plane: they
// fail closed, so once nothing serves them every later HyperJob, Volcano Job and
// PropagationPolicy on the plane would be refused. Safe to call twice.
func (m *Manager) Stop(ctx context.Context) error {
	if m == nil {
		return nil
	}
	errs := []error{m.Process.Stop()}
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.MutatingConfigurationName}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.ValidatingConfigurationName}},
	} {
		if err := m.plane.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s from the plane: %w", obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
