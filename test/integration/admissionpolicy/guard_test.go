package admissionpolicy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// TestParamsGuard: a namespace's own users cannot rewrite its params (their defaults and allowed
// queues) — RBAC lets them write ConfigMaps there, the guard policy refuses — but a terminating
// namespace's params can be deleted, so namespace deletion is never blocked.
func TestParamsGuard(t *testing.T) {
	p := profile(t, "guard", map[string]string{"team": "a"}, nil)
	cfg := rest.CopyConfig(env.Config)
	// A user RBAC allows everything (system:masters): only the guard stands in the way.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:masters", "system:authenticated"}}
	tenant, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	var cm corev1.ConfigMap
	require.NoError(t, tenant.Get(ctx, client.ObjectKey{Namespace: p.policy, Name: admissionpolicy.ParamsName}, &cm))
	cm.Data[admissionpolicy.KeyQueueRules] = ""
	err = tenant.Update(ctx, &cm)
	require.Error(t, err, "a tenant's update of the params")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "only the manager writes it")
	err = tenant.Delete(ctx, &cm)
	assert.True(t, apierrors.IsForbidden(err), "a tenant's delete of the params: %v", err)
	other := &corev1.ConfigMap{}
	other.Namespace, other.Name = p.policy, "tenant-config"
	require.NoError(t, tenant.Create(ctx, other), "other ConfigMaps are the tenant's")

	var ns corev1.Namespace
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: p.policy}, &ns))
	require.NoError(t, env.Client.Delete(ctx, &ns))
	// The guard reads the namespace from the apiserver's informer, which sees the deletion moments
	// later: until then the guard refuses, as for a live namespace.
	var lastErr error
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lastErr = tenant.Delete(ctx, &cm)
		return lastErr == nil, nil
	})
	require.NoError(t, lastErr, "deleting the params of a terminating namespace (the namespace controller does)")
}
