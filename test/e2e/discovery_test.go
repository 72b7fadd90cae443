//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// The private local cluster runs with --discover: the manager's discovery builds the HyperNode tree
// from the kwok nodes' labels (Volcano's label source). Every tier-1 HyperNode is a discovered one
// whose members carry its label value, and hyperbatch-scheduler places a gang inside one of them.
func TestDiscoveredTreePlacesGang(t *testing.T) {
	ctx := context.Background()
	var hns topologyv1alpha1.HyperNodeList
	require.NoError(t, c.List(ctx, &hns, client.MatchingLabels{"volcano.sh/network-topology-source": "label"}))
	if len(hns.Items) == 0 {
		t.Skip("no HyperNode from the label source: the cluster was not started with --discover")
	}
	for _, hn := range hns.Items {
		var managers []string
		for _, mf := range hn.ManagedFields {
			managers = append(managers, mf.Manager)
		}
		assert.Equal(t, []string{"hyperbatch-discovery-label"}, managers, "HyperNode %s", hn.Name)
		if hn.Spec.Tier != 1 {
			continue
		}
		for _, m := range hn.Spec.Members {
			var n corev1.Node
			require.NoError(t, c.Get(ctx, client.ObjectKey{Name: m.Selector.ExactMatch.Name}, &n))
			assert.Equal(t, hn.Name, n.Labels["topology.hyperbatch.dev/leaf"], "node %s in leaf %s", n.Name, hn.Name)
		}
	}

	// A gang of 3 pods, each too big to share a 32-CPU node, confined to one tier-1 HyperNode.
	ns := primary.Namespace(t)
	const members = 3
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "gang", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: members, Queue: "default",
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: schedulingv1beta1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)}},
	}
	require.NoError(t, c.Create(ctx, pg))
	for i := 0; i < members; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gang-%d", i), Namespace: ns,
				Annotations: map[string]string{schedulingv1beta1.KubeGroupNameAnnotationKey: pg.Name}},
			Spec: corev1.PodSpec{
				SchedulerName: "hyperbatch-scheduler",
				Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "pause", Image: e2efw.Workload().Image,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20")}}}},
			},
		}
		require.NoError(t, c.Create(ctx, pod))
	}
	var nodes []string
	e2efw.Poll(t, 120*time.Second, "hyperbatch-scheduler to bind the gang", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		nodes = nodes[:0]
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) == members, nil
	})
	leaves := leafOf(t)
	set := map[string]bool{}
	distinct := map[string]bool{}
	for _, n := range nodes {
		set[leaves[n]] = true
		distinct[n] = true
	}
	assert.Len(t, distinct, members, "each pod needs a node of its own")
	assert.Len(t, set, 1, "the gang's nodes %v lie in tier-1 HyperNodes %v, want one", nodes, set)
	assert.NotContains(t, set, "", "a node of the gang is in no tier-1 HyperNode")
}
