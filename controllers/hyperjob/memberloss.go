package hyperjob

import (
	"context"
	"fmt"
	"sort"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// A member cluster lost: Karmada has no failover for a Volcano Job that hyperbatch could rely on,
// and hyperbatch invents none. It reports the loss: the condition below names every child whose
// member Karmada reports not Ready, with an Event when it appears; it clears when the members are
// Ready again. What the user does next is in docs/multicluster.md ("A member lost").

// ConditionMemberClusterLost is True while a child of the HyperJob is bound to a member cluster
// whose Karmada Cluster is not Ready (False or Unknown).
const ConditionMemberClusterLost = "MemberClusterLost"

// Reasons of ConditionMemberClusterLost (and the Event when it turns True).
const (
	ReasonMemberNotReady = "MemberClusterNotReady"
	ReasonMembersReady   = "MemberClustersReady"
)

// bindingsAndClusters lists the namespace's ResourceBindings and Karmada's Clusters: what
// lostChildren and checkAutoRefused read a child's member and that member's state from.
func (r *Reconciler) bindingsAndClusters(ctx context.Context, namespace string) (*workv1alpha2.ResourceBindingList, *clusterv1alpha1.ClusterList, error) {
	var rbs workv1alpha2.ResourceBindingList
	if err := r.client.List(ctx, &rbs, client.InNamespace(namespace)); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, nil, fmt.Errorf("listing ResourceBindings: %w", err)
	}
	var clusters clusterv1alpha1.ClusterList
	if err := r.client.List(ctx, &clusters); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, nil, fmt.Errorf("listing Karmada's Clusters: %w", err)
	}
	return &rbs, &clusters, nil
}

// lostChildren maps each existing child bound to a member cluster that is not Ready to that member.
func (r *Reconciler) lostChildren(ctx context.Context, hj *trainingv1alpha1.HyperJob, jobs map[string]*batchv1alpha1.Job) (map[string]string, error) {
	if !r.watchMembers || len(jobs) == 0 {
		return nil, nil
	}
	rbs, clusters, err := r.bindingsAndClusters(ctx, hj.Namespace)
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	for i := range clusters.Items {
		ready[clusters.Items[i].Name] = clusterReady(&clusters.Items[i])
	}
	lost := map[string]string{}
	bindings := bindingsByChild(rbs.Items)
	for name := range jobs {
		rb := bindings[name]
		if rb == nil {
			continue
		}
		for _, tc := range rb.Spec.Clusters {
			if !ready[tc.Name] {
				lost[name] = tc.Name
			}
		}
	}
	return lost, nil
}

// setMemberLost records lost (child → member) in the status: True with the children and members
// named, or False once none is lost (only when the condition was set before). It reports the
// condition when it newly turned True, for an Event. A finished HyperJob's status is left alone.
func setMemberLost(hj *trainingv1alpha1.HyperJob, st *trainingv1alpha1.HyperJobStatus, lost map[string]string) *metav1.Condition {
	if hyperjobstatus.IsFinished(st) {
		return nil
	}
	prev := apimeta.FindStatusCondition(st.Conditions, ConditionMemberClusterLost)
	if len(lost) == 0 {
		if prev != nil && prev.Status != metav1.ConditionFalse {
			apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionMemberClusterLost, Status: metav1.ConditionFalse,
				Reason: ReasonMembersReady, Message: "every child's member cluster is Ready", ObservedGeneration: hj.Generation})
		}
		return nil
	}
	byMember := map[string][]string{}
	for child, m := range lost {
		byMember[m] = append(byMember[m], child)
	}
	var parts []string
	for m, cs := range byMember {
		sort.Strings(cs)
		parts = append(parts, fmt.Sprintf("%s (%s)", m, strings.Join(cs, ", ")))
	}
	sort.Strings(parts)
	c := metav1.Condition{Type: ConditionMemberClusterLost, Status: metav1.ConditionTrue, Reason: ReasonMemberNotReady, ObservedGeneration: hj.Generation,
		Message: fmt.Sprintf("%d of the children run on member clusters Karmada reports not Ready: %s. Their state above is the last one Karmada reflected; "+
			"Karmada moves none of them. If the member does not come back, unjoin it and delete and resubmit the HyperJob", len(lost), strings.Join(parts, "; "))}
	apimeta.SetStatusCondition(&st.Conditions, c)
	if prev == nil || prev.Status != metav1.ConditionTrue {
		return &c
	}
	return nil
}

// eventForMemberLost emits the Warning Event of a newly lost member.
func (r *Reconciler) eventForMemberLost(hj *trainingv1alpha1.HyperJob, c *metav1.Condition) {
	if c != nil {
		r.recorder.Event(hj, corev1.EventTypeWarning, c.Reason, c.Message)
	}
}
