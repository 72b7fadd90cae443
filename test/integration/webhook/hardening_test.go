package webhook

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/naming"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func propagationPolicy(ns, name string, clusters ...string) *policyv1alpha1.PropagationPolicy {
	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}}}}
	if len(clusters) > 0 {
		pp.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}
	}
	return pp
}

// A HyperJob whose replicas add up to more than naming.MaxChildren is refused through the apiserver,
// with the field, the total and the limit.
func TestHyperJobChildCountBound(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "bound-a", map[string]string{"team": "a"}, nil)
	err := env.Client.Create(ctx, hyperJob("bound-a", "huge", replicatedJob("a", 100000), replicatedJob("b", 100000), replicatedJob("c", 100000)))
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	wantContains(t, "error", err.Error(), `admission webhook "hyperjob.validate.hyperbatch.dev" denied the request`,
		"spec.replicatedJobs[*].replicas: Invalid value: 300000: the HyperJob would have 300000 child jobs (the sum of spec.replicatedJobs[*].replicas)",
		fmt.Sprintf("more than the limit of %d per HyperJob", naming.MaxChildren))
	require.NoError(t, env.Client.Create(ctx, hyperJob("bound-a", "at-limit", replicatedJob("a", naming.MaxChildren)), client.DryRunAll))
}

// allowedClusters through the apiserver: PropagationPolicies and HyperJob clusterNames.
func TestAllowedClusters(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "clusters-h", map[string]string{"team": "clusters"}, nil)
	pol := builders.MakePolicy("clusters-h").Selector("team", "clusters").AllowedClusters("c1", "c2").Obj()
	require.NoError(t, env.Client.Create(ctx, pol))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	// The positive signal that the webhook's cache has the policy: a dry run is refused.
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = env.Client.Create(ctx, propagationPolicy("clusters-h", "probe", "c9"), client.DryRunAll)
		return apierrors.IsInvalid(last), nil
	})
	require.NoError(t, err, "the policy was never enforced; last answer: %v", last)
	wantContains(t, "error", last.Error(), `admission webhook "propagationpolicy.validate.hyperbatch.dev" denied the request`,
		`spec.placement.clusterAffinity.clusterNames: Forbidden: cluster "c9" is not allowed in namespace "clusters-h": WorkloadPolicy "clusters-h" allows only "c1", "c2"`)

	err = env.Client.Create(ctx, propagationPolicy("clusters-h", "everywhere"))
	require.True(t, apierrors.IsInvalid(err), "a PropagationPolicy naming no clusters: %v", err)
	wantContains(t, "error", err.Error(), "naming no clusters (which propagates to every cluster) is not allowed")
	require.NoError(t, env.Client.Create(ctx, propagationPolicy("clusters-h", "ok", "c2")))

	rj := replicatedJob("r", 1)
	rj.ClusterNames = []string{"c1", "c3"}
	err = env.Client.Create(ctx, hyperJob("clusters-h", "hj", rj))
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	wantContains(t, "error", err.Error(), `spec.replicatedJobs[0].clusterNames: Forbidden: cluster "c3" is not allowed in namespace "clusters-h"`)
	rj.ClusterNames = []string{"c1"}
	require.NoError(t, env.Client.Create(ctx, hyperJob("clusters-h", "hj", rj)))
}

// The Pod UPDATE bypass: a Pod admitted with a disallowed queue because it named a PodGroup cannot
// drop the group-name annotation and keep the queue.
func TestPodCannotDropGroupToKeepADisallowedQueue(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "bypass-a", map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bypass-a",
		Annotations: map[string]string{defaults.QueueNameAnnotation: "gpu", defaults.GroupNameAnnotation: "pg"}},
		Spec: podSpec()}
	require.NoError(t, env.Client.Create(ctx, pod), "a PodGroup member is scheduled in its PodGroup's queue")
	delete(pod.Annotations, defaults.GroupNameAnnotation)
	err := env.Client.Update(ctx, pod)
	require.True(t, apierrors.IsInvalid(err), "dropping the group-name annotation: want Invalid, got %v", err)
	wantContains(t, "error", err.Error(), `metadata.annotations[scheduling.volcano.sh/queue-name]: Forbidden: queue "gpu" is not allowed in namespace "bypass-a"`)
	var stored corev1.Pod
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &stored))
	assert.Equal(t, "pg", stored.Annotations[defaults.GroupNameAnnotation])
}
