package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/admissionpolicy"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// In policy mode the manager applies the generated policies on a real apiserver; with
// --admission-warnings=false it leaves out the Warn policy and deletes the one an earlier manager
// applied; webhook mode deletes them all.
func TestApplyAdmissionPolicies(t *testing.T) {
	env, err := framework.Start(framework.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	present := func() map[string]bool {
		out := map[string]bool{}
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		var vbs admissionregistrationv1.ValidatingAdmissionPolicyBindingList
		var maps admissionregistrationv1.MutatingAdmissionPolicyList
		require.NoError(t, env.Client.List(ctx, &vaps, client.HasLabels{admissionpolicy.ManagedByLabel}))
		require.NoError(t, env.Client.List(ctx, &vbs, client.HasLabels{admissionpolicy.ManagedByLabel}))
		require.NoError(t, env.Client.List(ctx, &maps, client.HasLabels{admissionpolicy.ManagedByLabel}))
		for _, p := range vaps.Items {
			out["vap/"+p.Name] = true
		}
		for _, b := range vbs.Items {
			out["binding/"+b.Name] = true
		}
		for _, m := range maps.Items {
			out["map/"+m.Name] = true
		}
		return out
	}
	warn, checks := admissionpolicy.WarnPolicyName(defaults.KindPod), admissionpolicy.CheckPolicyName(defaults.KindPod)
	create := admissionpolicy.CreatePolicyName(defaults.KindPod)

	require.NoError(t, applyAdmissionPolicies(ctx, env.Config, admissionPolicy, options{admissionWarnings: true}))
	got := present()
	assert.True(t, got["vap/"+warn] && got["binding/"+warn], "the Warn policy and binding: %v", got)
	assert.True(t, got["vap/"+checks] && got["map/"+create], "the checks and defaults: %v", got)

	require.NoError(t, applyAdmissionPolicies(ctx, env.Config, admissionPolicy, options{admissionWarnings: false}))
	got = present()
	assert.False(t, got["vap/"+warn] || got["binding/"+warn], "--admission-warnings=false leaves no Warn policy: %v", got)
	assert.True(t, got["vap/"+checks] && got["binding/"+checks] && got["map/"+create], "the checks and defaults stay: %v", got)

	require.NoError(t, applyAdmissionPolicies(ctx, env.Config, admissionWebhook, options{admissionWarnings: true}))
	assert.Empty(t, present(), "webhook mode deletes every generated policy and binding")
}
