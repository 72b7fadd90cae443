package hyperjob

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/autosplit"
)

// A member's numbers for mode auto (docs/multicluster.md, "Data source"): its nodes, the pods bound
// to them and its HyperNode tree, read through Karmada's cluster proxy
// (/apis/cluster.karmada.io/v1alpha1/clusters/<member>/proxy) when a HyperJob is decided. Nothing
// is cached between decisions: a HyperJob is decided once, and a waiting one again only when a
// member's Cluster status changes or the retry interval passes.

// +kubebuilder:rbac:groups=cluster.karmada.io,resources=clusters,verbs=get;list;watch

// memberSnapshot is one member's numbers for one accelerator type.
type memberSnapshot struct {
	member autosplit.Member
	// shown counts, per Volcano Job (namespace/name), its pods requesting the accelerator that are
	// bound to a node: those the member's free numbers already account for.
	shown map[types.NamespacedName]int
}

// memberReader reads a member's snapshot.
type memberReader func(ctx context.Context, cluster string, res corev1.ResourceName) (*memberSnapshot, error)

// clusterProxyMemberReader reads members through Karmada's cluster proxy as the identity of cfg
// (Karmada impersonates it in the member: it needs to list nodes, pods and HyperNodes there).
func clusterProxyMemberReader(cfg *rest.Config) memberReader {
	return func(ctx context.Context, cluster string, res corev1.ResourceName) (*memberSnapshot, error) {
		pc := rest.CopyConfig(cfg)
		pc.Host = strings.TrimSuffix(cfg.Host, "/") + "/apis/cluster.karmada.io/v1alpha1/clusters/" + cluster + "/proxy"
		cs, err := kubernetes.NewForConfig(pc)
		if err != nil {
			return nil, fmt.Errorf("client for member %s through Karmada's cluster proxy: %w", cluster, err)
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the nodes of member %s through Karmada's cluster proxy: %w", cluster, err)
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
		if err != nil {
			return nil, fmt.Errorf("listing the bound pods of member %s through Karmada's cluster proxy: %w", cluster, err)
		}
		var hns topologyv1alpha1.HyperNodeList
		raw, err := cs.RESTClient().Get().AbsPath("/apis", topologyv1alpha1.SchemeGroupVersion.Group, topologyv1alpha1.SchemeGroupVersion.Version, "hypernodes").DoRaw(ctx)
		switch {
		case apierrors.IsNotFound(err):
			// No HyperNode kind in the member: it has no tree (only children without a tier limit fit).
		case err != nil:
			return nil, fmt.Errorf("listing the HyperNodes of member %s through Karmada's cluster proxy: %w", cluster, err)
		default:
			if err := json.Unmarshal(raw, &hns); err != nil {
				return nil, fmt.Errorf("decoding the HyperNodes of member %s: %w", cluster, err)
			}
		}
		return snapshotOf(cluster, res, nodes.Items, pods.Items, hns.Items), nil
	}
}

// snapshotOf computes a member's free accelerators per node (allocatable minus the requests of
// bound pods that have not finished; nodes that are not Ready or are cordoned have none) and its
// HyperNode tree with every member selector resolved to names. It is pure.
func snapshotOf(cluster string, res corev1.ResourceName, nodes []corev1.Node, pods []corev1.Pod, hns []topologyv1alpha1.HyperNode) *memberSnapshot {
	s := &memberSnapshot{member: autosplit.Member{Name: cluster, Ready: true, Free: map[string]int64{}}, shown: map[types.NamespacedName]int{}}
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		if q, ok := n.Status.Allocatable[res]; ok {
			s.member.Free[n.Name] = q.Value()
		}
	}
	for i := range pods {
		p := &pods[i]
		d, err := PodDemand(&p.Spec, res)
		if err != nil || d == 0 || p.Spec.NodeName == "" {
			continue
		}
		if job := p.Labels[batchv1alpha1.JobNameKey]; job != "" {
			s.shown[types.NamespacedName{Namespace: p.Namespace, Name: job}]++
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if f, ok := s.member.Free[p.Spec.NodeName]; ok {
			s.member.Free[p.Spec.NodeName] = f - d
		}
	}
	s.member.HyperNodes = resolveHyperNodes(hns, nodes)
	return s
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resolveHyperNodes turns HyperNodes into autosplit's form: tier-1 HyperNodes list the names of
// the nodes their members select (exactMatch, regexMatch, labelMatch, as Volcano resolves them),
// higher tiers the names of their HyperNode members (exactMatch).
func resolveHyperNodes(hns []topologyv1alpha1.HyperNode, nodes []corev1.Node) []autosplit.HyperNode {
	out := make([]autosplit.HyperNode, 0, len(hns))
	for i := range hns {
		h := &hns[i]
		ah := autosplit.HyperNode{Name: h.Name, Tier: h.Spec.Tier}
		for _, m := range h.Spec.Members {
			sel := m.Selector
			switch m.Type {
			case topologyv1alpha1.MemberTypeHyperNode:
				if sel.ExactMatch != nil && sel.ExactMatch.Name != "" {
					ah.Members = append(ah.Members, sel.ExactMatch.Name)
				}
			case topologyv1alpha1.MemberTypeNode:
				ah.Members = append(ah.Members, selectNodes(sel, nodes)...)
			}
		}
		out = append(out, ah)
	}
	return out
}

// selectNodes lists the nodes a Node member's selector picks (the union of the selectors set).
func selectNodes(sel topologyv1alpha1.MemberSelector, nodes []corev1.Node) []string {
	var re *regexp.Regexp
	if sel.RegexMatch != nil && sel.RegexMatch.Pattern != "" {
		re, _ = regexp.Compile(sel.RegexMatch.Pattern) // an invalid pattern selects nothing, as in Volcano
	}
	var ls labels.Selector
	if sel.LabelMatch != nil {
		if s, err := metav1.LabelSelectorAsSelector(sel.LabelMatch); err == nil && !s.Empty() {
			ls = s
		}
	}
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if (sel.ExactMatch != nil && sel.ExactMatch.Name == n.Name) ||
			(re != nil && re.MatchString(n.Name)) ||
			(ls != nil && ls.Matches(labels.Set(n.Labels))) {
			out = append(out, n.Name)
		}
	}
	return out
}
