package hyperjob

import (
	"context"
	"fmt"
	"strings"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

// Final counts of children that finished in a member cluster (docs/multicluster.md, "Final counts").
//
// Volcano's job controller reports a finished job's pod counts once, on the pass that finishes it,
// and zeroes them on the next pass (a few milliseconds later) while its Succeeded and Failed pods
// stay. Karmada reflects only the member's latest status into the template on the control plane,
// so there a finished child reports no pods at all. For such a child, whose ResourceBinding names
// exactly one member cluster, the controller counts the child's pods in that member once, through
// Karmada's cluster proxy, when it freezes the child's final counts.

// +kubebuilder:rbac:groups=cluster.karmada.io,resources=clusters/proxy,verbs=get

// memberPodCounter counts the Succeeded and Failed pods of Volcano Job ns/job in a member cluster.
type memberPodCounter func(ctx context.Context, cluster, ns, job string) (podCounts, error)

// clusterProxyPodCounter lists the job's pods (Volcano's volcano.sh/job-name label) through
// Karmada's cluster proxy, /apis/cluster.karmada.io/v1alpha1/clusters/<cluster>/proxy, as the
// identity of cfg (Karmada impersonates it in the member: it needs to list pods there).
func clusterProxyPodCounter(cfg *rest.Config) memberPodCounter {
	return func(ctx context.Context, cluster, ns, job string) (podCounts, error) {
		pc := rest.CopyConfig(cfg)
		pc.Host = strings.TrimSuffix(cfg.Host, "/") + "/apis/cluster.karmada.io/v1alpha1/clusters/" + cluster + "/proxy"
		cs, err := kubernetes.NewForConfig(pc)
		if err != nil {
			return podCounts{}, fmt.Errorf("client for member %s through Karmada's cluster proxy: %w", cluster, err)
		}
		sel := labels.SelectorFromSet(labels.Set{batchv1alpha1.JobNameKey: job}).String()
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return podCounts{}, fmt.Errorf("listing the pods of %s/%s in member %s through Karmada's cluster proxy: %w", ns, job, cluster, err)
		}
		return countPods(pods.Items), nil
	}
}

// countPods is [Succeeded, Failed] over pods.
func countPods(pods []corev1.Pod) podCounts {
	var c podCounts
	for i := range pods {
		switch pods[i].Status.Phase {
		case corev1.PodSucceeded:
			c[0]++
		case corev1.PodFailed:
			c[1]++
		}
	}
	return c
}

// uncountedFinished lists the children of the plan that are finished, have no frozen counts yet and
// report neither succeeded nor failed pods: the ones whose counts must be read from their member.
func uncountedFinished(hj *trainingv1alpha1.HyperJob, fp finishedPods, plan *Plan, jobs map[string]*batchv1alpha1.Job) []string {
	if plan == nil || plan.Refusal != nil {
		return nil
	}
	var out []string
	for rj, names := range plan.byReplicatedJob {
		for _, n := range names {
			j := jobs[n]
			if j == nil || !finished(j.Status.State.Phase) || j.Status.Succeeded+j.Status.Failed > 0 {
				continue
			}
			if _, done := fp.get(hj.Name, rj, n); done {
				continue
			}
			out = append(out, n)
		}
	}
	return out
}

// memberCounts reads, for each child of uncountedFinished that Karmada scheduled to exactly one
// member, its pods' counts there. A child it cannot count keeps what it reports (logged and an
// Event): the HyperJob's completion is never held up by the proxy.
func (r *Reconciler) memberCounts(ctx context.Context, hj *trainingv1alpha1.HyperJob, fp finishedPods, plan *Plan, jobs map[string]*batchv1alpha1.Job) map[string]podCounts {
	if r.memberPods == nil {
		return nil
	}
	names := uncountedFinished(hj, fp, plan, jobs)
	if len(names) == 0 {
		return nil
	}
	var rbs workv1alpha2.ResourceBindingList
	if err := r.client.List(ctx, &rbs, client.InNamespace(hj.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing ResourceBindings to count finished children's pods in their members")
		return nil
	}
	byChild := bindingsByChild(rbs.Items)
	out := map[string]podCounts{}
	for _, n := range names {
		rb := byChild[n]
		if rb == nil || len(rb.Spec.Clusters) != 1 {
			continue
		}
		cluster := rb.Spec.Clusters[0].Name
		c, err := r.memberPods(ctx, cluster, hj.Namespace, n)
		if err != nil {
			log.FromContext(ctx).Error(err, "final pod counts of a finished child are what it reports", "child", n, "cluster", cluster)
			r.recorder.Eventf(hj, corev1.EventTypeWarning, ReasonFinalCountsUnavailable,
				"child %s finished in %s reporting no pods, and its pods there could not be counted: %v", n, cluster, err)
			continue
		}
		out[n] = c
	}
	return out
}

// ReasonFinalCountsUnavailable is the Event of a finished child whose pods could not be counted in
// its member.
const ReasonFinalCountsUnavailable = "FinalCountsUnavailable"
