//go:build e2e

package e2e

// On real nodes (HYPERBATCH_E2E_NODES=real): a gang JobSet whose 4 pods really run the worker image,
// placed by hyperbatch-scheduler inside one tier-1 HyperNode, each container exiting 0 in containerd.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/defaults"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const (
	realGangReplicas = 2
	realGangPodsPer  = 2
	realGangSize     = realGangReplicas * realGangPodsPer
)

func TestJobSetGangOnRealNodes(t *testing.T) {
	e2efw.SkipUnlessReal(t, "the gang's pods run the worker image in containerd and exit 0")
	ns := primary.Namespace(t)
	queue := "realgang-" + ns
	openQueue(t, queue)
	tmpl := workloadTemplate("worker").Scheduler("hyperbatch-scheduler").
		Request(corev1.ResourceCPU, "100m").Request(corev1.ResourceMemory, "32Mi").Obj()
	tmpl.Spec.Containers[0].Args = []string{"--duration=3s"}
	m, err := builders.MakeJobSet(ns, "gang").Annotation(defaults.QueueNameAnnotation, queue).
		Annotation(defaults.NetworkTopologyModeAnnotation, "hard").
		ReplicatedJob("workers", realGangReplicas, realGangPodsPer, tmpl).Manifest()
	require.NoError(t, err)
	manifest := writeManifest(t, m)
	out, err := primary.Kubectl("apply", "-f", manifest)
	require.NoError(t, err, "kubectl apply: %s", out)
	t.Cleanup(func() { _, _ = primary.Kubectl("delete", "-f", manifest, "--wait=false") })

	pg := &schedulingv1beta1.PodGroup{}
	e2efw.Poll(t, 60*time.Second, fmt.Sprintf("the JobSet's PodGroup with minMember %d", realGangSize), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gang"}, pg)
		return err == nil && pg.Spec.MinMember == realGangSize, client.IgnoreNotFound(err)
	})

	// Every pod succeeds in a containerd container that exited 0.
	var pods corev1.PodList
	e2efw.Poll(t, 3*time.Minute, fmt.Sprintf("the %d pods to run the worker to completion", realGangSize), func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "gang"}); err != nil {
			return false, err
		}
		done := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodFailed {
				return false, fmt.Errorf("pod %s failed on %s: %+v", p.Name, p.Spec.NodeName, p.Status.ContainerStatuses)
			}
			if p.Status.Phase == corev1.PodSucceeded {
				done++
			}
		}
		return len(pods.Items) == realGangSize && done == realGangSize, nil
	})
	tree := readHyperNodeTree(t)
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
		assert.Equal(t, "gang", p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in the gang", p.Name)
		require.NotEmpty(t, p.Status.ContainerStatuses, "pod %s", p.Name)
		cs := p.Status.ContainerStatuses[0]
		assert.True(t, strings.HasPrefix(cs.ContainerID, "containerd://"), "pod %s ran in %q, not containerd", p.Name, cs.ContainerID)
		if assert.NotNil(t, cs.State.Terminated, "pod %s", p.Name) {
			assert.Equal(t, int32(0), cs.State.Terminated.ExitCode, "pod %s exit code", p.Name)
		}
	}
	var leaves []string
	for name, members := range tree.nodes {
		inside := tree.tier[name] == 1
		for n := range nodes {
			inside = inside && members[n]
		}
		if inside {
			leaves = append(leaves, name)
		}
	}
	assert.Len(t, leaves, 1, "the gang's nodes %v must lie inside one tier-1 HyperNode; inside: %v", nodes, leaves)
	waitScheduledBy(t, ns, "hyperbatch-scheduler", realGangSize)

	// The worker's own report, read from the kubelet through the API server.
	cs, err := kubernetes.NewForConfig(primary.Config)
	require.NoError(t, err)
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	require.NoError(t, err, "logs of %s", pods.Items[0].Name)
	assert.Contains(t, string(logs), "worker: rank ", "the worker's report")
	assert.Contains(t, string(logs), "worker: done after 3s, exit code 0")
	t.Logf("gang of %d on %v inside %v", realGangSize, nodes, leaves)
}
