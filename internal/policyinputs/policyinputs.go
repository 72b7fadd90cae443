// Package policyinputs reads what the defaults engine decides on for one namespace: the Namespace
// and every WorkloadPolicy. The HyperJob and JobSet PodGroup controllers read them from the manager's
// cache; policies take effect there when their watch events arrive (docs/webhooks.md, "New
// policies").
package policyinputs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

// Inputs are one read of a namespace's policy inputs.
type Inputs struct {
	Namespace defaults.Namespace
	Policies  *defaults.Policies
}

// Read reads the Namespace and the WorkloadPolicies through c. Invalid policies are left out of
// Policies' defaults (their allowed lists still apply, see defaults.NewPolicies) and logged at V(1);
// the WorkloadPolicy controller reports them.
func Read(ctx context.Context, c client.Reader, namespace string) (Inputs, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		return Inputs{}, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	var list hbv1.WorkloadPolicyList
	if err := c.List(ctx, &list); err != nil {
		return Inputs{}, fmt.Errorf("listing WorkloadPolicies: %w", err)
	}
	pols, err := defaults.NewPolicies(list.Items)
	if err != nil {
		log.FromContext(ctx).V(1).Info("ignoring invalid WorkloadPolicies", "error", err.Error())
	}
	return Inputs{Namespace: defaults.NamespaceOf(&ns), Policies: pols}, nil
}
