//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

// A pod that names hyperbatch-scheduler is bound by it and reaches Running.
func TestHyperbatchSchedulerRunsAPod(t *testing.T) {
	ns := primary.Namespace(t)
	n := e2efw.Workload()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns}, Spec: corev1.PodSpec{
		SchedulerName: "hyperbatch-scheduler",
		Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers:    []corev1.Container{n.RunningContainer("pause", 10*time.Minute)},
	}}
	n.Apply(&pod.Spec)
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	e2efw.Poll(t, 60*time.Second, "the pod to be bound and Running", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodRunning, nil
	})
	waitScheduledBy(t, ns, "hyperbatch-scheduler", 1)
}

// The cluster has a HyperNode tree whose node members exist and whose tiers rise towards the root.
func TestHyperNodeTree(t *testing.T) {
	var hns topologyv1alpha1.HyperNodeList
	if err := c.List(context.Background(), &hns); err != nil {
		t.Fatal(err)
	}
	if len(hns.Items) == 0 {
		t.Fatal("no HyperNodes in the cluster")
	}
	byName := map[string]topologyv1alpha1.HyperNode{}
	for _, h := range hns.Items {
		byName[h.Name] = h
	}
	tiers := map[int]int{}
	for _, h := range hns.Items {
		tiers[h.Spec.Tier]++
		for _, m := range h.Spec.Members {
			if m.Selector.ExactMatch == nil {
				continue
			}
			name := m.Selector.ExactMatch.Name
			switch m.Type {
			case topologyv1alpha1.MemberTypeNode:
				var n corev1.Node
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
					t.Errorf("HyperNode %s lists node %s: %v", h.Name, name, err)
				}
			case topologyv1alpha1.MemberTypeHyperNode:
				child, ok := byName[name]
				if !ok {
					t.Errorf("HyperNode %s lists missing HyperNode %s", h.Name, name)
				} else if child.Spec.Tier >= h.Spec.Tier {
					t.Errorf("HyperNode %s (tier %d) has child %s of tier %d", h.Name, h.Spec.Tier, name, child.Spec.Tier)
				}
			}
		}
	}
	if len(tiers) < 3 {
		t.Errorf("want a tree of 3 tiers, got tiers %v", tiers)
	}
}

// The hyperbatch manager runs: it keeps WorkloadPolicy status.
func TestManagerKeepsPolicyStatus(t *testing.T) {
	ns := primary.Namespace(t)
	name := fmt.Sprintf("e2e-%s", ns)
	p := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	e2efw.Poll(t, 30*time.Second, "the manager to report the policy's status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.MatchingNamespaces == 1, nil
	})
}

// The local cluster's kube-controller-manager runs the disruption controller: a PodDisruptionBudget
// gets a status (observedGeneration, disruptionsAllowed), which gang preemption reads (issue 38:
// without it every budget allowed nothing and blocked every eviction it selected).
func TestPodDisruptionBudgetGetsStatus(t *testing.T) {
	ns := primary.Namespace(t)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "budget", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(0)),
		Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "budgeted"}},
	}}
	if err := c.Create(context.Background(), pdb); err != nil {
		t.Fatalf("create PodDisruptionBudget: %v", err)
	}
	e2efw.Poll(t, 60*time.Second, "the disruption controller to write the budget's status", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation, nil
	})
}
