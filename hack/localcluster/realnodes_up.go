package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// upRealNodes brings up the real nodes of a cluster whose API server runs on the bridge r.prepare
// made: the containerds, make images' archives in each, the kubelets and kube-proxy, then waits
// until every node is Ready and creates their HyperNode tree (two leaves under real-spine).
func (l layout) upRealNodes(ctx context.Context, s *localproc.Session, k *kube, r realNodes) error {
	begin := time.Now()
	if err := s.Start(ctx, r.cl.Name, r.runtimes()...); err != nil {
		return err
	}
	t := time.Now()
	if err := r.importImages(ctx); err != nil {
		return err
	}
	step("imported %d images into %d containerds (%s)", len(realImages), r.n, since(t))
	// One kubelet at a time, each until its node is Ready: every kubelet binds the same device
	// plugin socket (/var/lib/kubelet/device-plugins/kubelet.sock, not under --root-dir), and two
	// starting at once made one fail its ContainerManager ("address already in use") and never
	// register. A node is Ready only after its ContainerManager started. kube-proxy comes last.
	for i, c := range r.kubelets() {
		if err := s.Start(ctx, r.cl.Name, c); err != nil {
			return err
		}
		if i < r.n {
			if err := k.waitRealNodesReady(ctx, i+1); err != nil {
				return err
			}
		}
	}
	if err := k.createRealTree(ctx, r); err != nil {
		return err
	}
	step("%d real nodes Ready in HyperNodes %s-0, %s-1 under %s (%s)", r.n, realLeafPrefix, realLeafPrefix, realSpineName, since(begin))
	return nil
}

// waitRealNodesReady waits until want real nodes are Ready.
func (k *kube) waitRealNodesReady(ctx context.Context, want int) error {
	const timeout = 120 * time.Second
	deadline := time.Now().Add(timeout)
	for {
		var nodes corev1.NodeList
		if err := k.c.List(ctx, &nodes, client.MatchingLabels{realNodeLabel: realNodeLabelValue}); err != nil {
			return fmt.Errorf("listing real nodes: %w", err)
		}
		ready := 0
		var notReady []string
		for i := range nodes.Items {
			if nodeReady(&nodes.Items[i]) {
				ready++
			} else {
				notReady = append(notReady, nodes.Items[i].Name+": "+readyMessage(&nodes.Items[i]))
			}
		}
		if ready >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d real nodes Ready after %s (%s).\n%s", ready, want, timeout, strings.Join(notReady, "; "), logTail(k.cl.LogFile(fmt.Sprintf("kubelet-%d", want-1))))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

func readyMessage(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Reason + " " + c.Message
		}
	}
	return "no Ready condition yet"
}

// createRealTree creates the real nodes' HyperNodes: real-leaf-0 and real-leaf-1 (tier 1) under
// real-spine (tier 2).
func (k *kube) createRealTree(ctx context.Context, r realNodes) error {
	leaves := map[string][]string{}
	for i := 0; i < r.n; i++ {
		leaves[r.leaf(i)] = append(leaves[r.leaf(i)], r.name(i))
	}
	groups := []switchGroup{
		{Name: realLeafPrefix + "-0", Tier: tierLeaf, TierName: "leaf", Type: topologyv1alpha1.MemberTypeNode, Members: leaves[realLeafPrefix+"-0"]},
		{Name: realLeafPrefix + "-1", Tier: tierLeaf, TierName: "leaf", Type: topologyv1alpha1.MemberTypeNode, Members: leaves[realLeafPrefix+"-1"]},
		{Name: realSpineName, Tier: tierSpine, TierName: "spine", Type: topologyv1alpha1.MemberTypeHyperNode, Members: []string{realLeafPrefix + "-0", realLeafPrefix + "-1"}},
	}
	for _, g := range groups {
		if err := createIgnoringExisting(ctx, k.c, hyperNodeObject(g)); err != nil {
			return fmt.Errorf("creating HyperNode: %w", err)
		}
	}
	return nil
}

const demoRealPodName = "hyperbatch-smoke-real"

// demoRealNode is the real nodes' acceptance check: a pod of the worker image, bound by
// hyperbatch-scheduler to a real node, runs in containerd and exits 0 (phase Succeeded, a containerd
// container ID, exit code 0).
func (k *kube) demoRealNode(ctx context.Context) error {
	begin := time.Now()
	const timeout = 120 * time.Second
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: demoRealPodName, Labels: map[string]string{managedByLabel: managedByValue}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			NodeSelector:  map[string]string{realNodeLabel: realNodeLabelValue},
			RestartPolicy: corev1.RestartPolicyNever,
			// Nothing in the worker talks to the API server.
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "worker", Image: realWorkerImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--duration=1s"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
		},
	}
	if err := k.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("real-node demo: creating pod default/%s: %w", demoRealPodName, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		var p corev1.Pod
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return fmt.Errorf("real-node demo: reading pod default/%s: %w", demoRealPodName, err)
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			id := ""
			if len(p.Status.ContainerStatuses) > 0 {
				id = p.Status.ContainerStatuses[0].ContainerID
			}
			step("real-node demo passed: pod default/%s ran %s on %s (container %s) and exited 0 (%s)", demoRealPodName, realWorkerImage, p.Spec.NodeName, id, since(begin))
			return nil
		case corev1.PodFailed:
			return fmt.Errorf("real-node demo failed: pod default/%s on %s failed: %s", demoRealPodName, p.Spec.NodeName, containerState(&p))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("real-node demo failed: pod default/%s is %s on %q after %s (%s; %s).\n%s", demoRealPodName, p.Status.Phase, p.Spec.NodeName, timeout,
				scheduledMessage(&p), containerState(&p), logTail(k.cl.LogFile("kubelet-0")))
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

func containerState(p *corev1.Pod) string {
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Terminated != nil:
			out = append(out, fmt.Sprintf("%s terminated %s exit %d: %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message))
		case cs.State.Waiting != nil:
			out = append(out, fmt.Sprintf("%s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Running != nil:
			out = append(out, cs.Name+" running")
		}
	}
	if len(out) == 0 {
		return "no container status"
	}
	return strings.Join(out, "; ")
}

// loadImages imports make images' archives into the containerd of every real node of the running
// cluster (`make images` calls it; a cluster without real nodes is left alone).
func loadImages(ctx context.Context, l layout) error {
	st := l.stateOf()
	loaded := 0
	for _, cl := range st.Clusters {
		rs, ok := readRealState(realNodesDir(cl.Dir))
		if !ok {
			continue
		}
		r := newRealNodes(l, cl, rs.N)
		for i := 0; i < r.n; i++ {
			if _, err := os.Stat(r.socket(i)); err != nil {
				return fmt.Errorf("%s's containerd is not running (no socket %s): start the cluster with `make run REAL_NODES=%d`", r.name(i), r.socket(i), r.n)
			}
		}
		t := time.Now()
		if err := r.importImages(ctx); err != nil {
			return err
		}
		loaded += r.n
		step("imported %d images into the containerds of %d real nodes of cluster %s (%s)", len(realImages), r.n, cl.Name, since(t))
	}
	if loaded == 0 {
		fmt.Printf("no real nodes run from %s: nothing to load the images into (make run REAL_NODES=2 starts them and loads the images itself)\n", l.rel(l.dir))
	}
	return nil
}

// downRealNodes undoes the host changes of every cluster's real nodes (after their processes stopped).
func downRealNodes(l layout, st localproc.State) error {
	var errs []error
	for _, cl := range st.Clusters {
		dir := realNodesDir(cl.Dir)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := cleanupRealNodes(dir, l.bin); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", cl.Name, err))
			continue
		}
		fmt.Printf("real nodes of cluster %s removed: processes, mounts, bridge %s and veths, iptables chains, cgroups, sysctls\n", cl.Name, realBridge)
	}
	return errors.Join(errs...)
}
