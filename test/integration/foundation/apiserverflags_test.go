package foundation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/discovery"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// servesMutatingAdmissionPolicies reports whether the API server of env serves
// admissionregistration.k8s.io/v1beta1 mutatingadmissionpolicies (beta and off by default in 1.34).
func servesMutatingAdmissionPolicies(t *testing.T, e *framework.Env) bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	require.NoError(t, err)
	// The group itself is always served (v1); the answer for v1beta1 is the signal either way.
	list, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	require.NoError(t, err)
	require.NotEmpty(t, list.APIResources, "admissionregistration.k8s.io/v1 lists no resources")
	beta, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1beta1")
	if err != nil {
		return false
	}
	for _, r := range beta.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true
		}
	}
	return false
}

// Options.FeatureGates and Options.RuntimeConfig reach kube-apiserver: with the gate and the API
// version on, it serves MutatingAdmissionPolicies; the suite's default control plane does not.
func TestOptionsPassAPIServerFeatureGatesAndRuntimeConfig(t *testing.T) {
	assert.False(t, servesMutatingAdmissionPolicies(t, env), "the default control plane serves v1beta1 MutatingAdmissionPolicies")
	e, err := framework.Start(framework.Options{
		FeatureGates:  map[string]bool{"MutatingAdmissionPolicy": true},
		RuntimeConfig: map[string]string{"admissionregistration.k8s.io/v1beta1": "true"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Stop()) })
	assert.True(t, servesMutatingAdmissionPolicies(t, e), "feature gate and runtime-config did not reach kube-apiserver")
}
