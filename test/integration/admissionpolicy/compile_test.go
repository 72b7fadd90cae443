package admissionpolicy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

// TestPoliciesCompile: the apiserver accepted every generated policy and binding (TestMain creates
// them; a CEL syntax or compile error is refused there), and its type check of each
// ValidatingAdmissionPolicy against the Pod schema and the ConfigMap params finds nothing (the
// kube-controller-manager's validatingadmissionpolicy-status-controller writes the type check).
func TestPoliciesCompile(t *testing.T) {
	kcm, err := framework.StartKubeControllerManager(env.Env, "validatingadmissionpolicy-status-controller")
	require.NoError(t, err)
	defer kcm.Stop()
	ctx, cancel := framework.Context(60 * time.Second)
	defer cancel()
	n := 0
	for _, obj := range policyObjects() {
		vap, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		n++
		var got admissionregistrationv1.ValidatingAdmissionPolicy
		require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vap), &got); err != nil {
				return false, err
			}
			return got.Status.ObservedGeneration == got.Generation && got.Status.TypeChecking != nil, nil
		}), "type check of %s", vap.Name)
		assert.Empty(t, got.Status.TypeChecking.ExpressionWarnings, "type check of %s", vap.Name)
	}
	assert.Equal(t, 3, n, "a checks, a warnings and the params guard policy")
}
