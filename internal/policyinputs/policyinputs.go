// Package policyinputs reads what the defaults engine decides on for one namespace (the Namespace
// and every WorkloadPolicy) through a client, and confirms a cached read against the apiserver.
//
// Controllers read these from the manager's cache, where the Namespace and the WorkloadPolicies
// arrive through their own watches: a policy created just before a workload may reach the controller
// after the workload does. Before a write that puts a workload in a queue (a decision a later reconcile
// cannot undo), a controller calls Confirm; when the stored inputs are newer it waits for its cache.
package policyinputs

import (
	"context"
	"fmt"
	"sort"
	"strings"

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
	// versions identifies what was read: the resourceVersions of the Namespace and of every
	// WorkloadPolicy, in a fixed order.
	versions string
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
	return Inputs{Namespace: defaults.NamespaceOf(&ns), Policies: pols, versions: versionsOf(&ns, list.Items)}, nil
}

func versionsOf(ns *corev1.Namespace, pols []hbv1.WorkloadPolicy) string {
	vs := make([]string, 0, len(pols))
	for i := range pols {
		vs = append(vs, pols[i].Name+"="+pols[i].ResourceVersion)
	}
	sort.Strings(vs)
	return "namespace=" + ns.ResourceVersion + ";" + strings.Join(vs, ",")
}

// Confirm reads the inputs of the same namespace from live (the apiserver) and says whether they are
// the ones cached saw. One Get and one List.
func Confirm(ctx context.Context, live client.Reader, namespace string, cached Inputs) (bool, error) {
	stored, err := Read(ctx, live, namespace)
	if err != nil {
		return false, fmt.Errorf("confirming the policy inputs of namespace %s: %w", namespace, err)
	}
	return stored.versions == cached.versions, nil
}
