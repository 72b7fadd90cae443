package localproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)

// GPUResource is the accelerator a member's fake nodes advertise.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Member nodes carry KwokNodeLabel=KwokNodeLabelValue (workloads select them with it).
const (
	KwokNodeLabel      = "type"
	KwokNodeLabelValue = "kwok"
)

// HyperbatchNamespace is the manager's own namespace in local clusters (--namespace).
const HyperbatchNamespace = "hyperbatch-system"

// MemberNode is one kwok node of a member cluster.
type MemberNode struct {
	Name string
	// GPUs is the node's nvidia.com/gpu capacity.
	GPUs int64
	// Leaf names the tier-1 HyperNode (leaf switch) the node hangs off; empty: in no HyperNode.
	Leaf string
	// Labels are added to the kwok and well-known labels.
	Labels map[string]string
}

// MemberOptions say what a member cluster runs.
type MemberOptions struct {
	// Nodes are the kwok nodes (at least one).
	Nodes []MemberNode
	// CRDDirs are installed before anything else starts (hyperbatch's config/crd, Volcano's).
	CRDDirs []string
	// Hyperbatch runs hyperbatch's manager and scheduler (the scheduler's configuration must be
	// written to c.SchedulerConfig() first: WriteSchedulerConfig).
	Hyperbatch bool
	// Root is the repository root. Set, kwok runs with WriteKwokConfig's stages, so pods with
	// KwokHoldAnnotation stay Running; empty, with kwok's default stages.
	Root string
}

// MemberCRDDirs are the CRDs a member serves, below the repository root: hyperbatch's (config/crd)
// and those of the kinds its manager watches in member mode (Volcano's, JobSet's, the HyperJob's;
// `make crds` writes them to _output/crds).
func MemberCRDDirs(root string) []string {
	return []string{filepath.Join(root, "config", "crd"), filepath.Join(root, "_output", "crds", "volcano"),
		filepath.Join(root, "_output", "crds", "jobset"), filepath.Join(root, "_output", "crds", "training")}
}

// MemberTier2 names the member's tier-2 HyperNode above all its leaves.
func MemberTier2(c Cluster) string { return c.Name + "-spine" }

// UpMember brings up a member cluster c (role RoleMember; PKI and kubeconfig written): the
// Kubernetes core, the CRDs, the kwok nodes (Ready) and the HyperNode tree (one tier-1 HyperNode per
// Leaf, one tier-2 HyperNode MemberTier2 above them), Volcano's webhook-manager (its configurations
// registered first: it only injects its caBundle) and controller-manager, the Queues root and default
// (Volcano's installation creates them) and, with Hyperbatch, hyperbatch's manager and scheduler.
func UpMember(ctx context.Context, c Cluster, bin string, o MemberOptions, start Starter) ([]Step, error) {
	if c.Role != RoleMember {
		return nil, fmt.Errorf("cluster %s has role %q, not %q", c.Name, c.Role, RoleMember)
	}
	if len(o.Nodes) == 0 {
		return nil, fmt.Errorf("member %s: no nodes", c.Name)
	}
	st := &steps{last: time.Now()}
	if o.Root != "" {
		if err := WriteKwokConfig(bin, c.KwokConfig()); err != nil {
			return nil, fmt.Errorf("member %s: %w", c.Name, err)
		}
	}
	core, err := KubeCore(c, bin)
	if err != nil {
		return nil, err
	}
	for _, stage := range core {
		if err := start(ctx, c, stage); err != nil {
			return st.list, err
		}
	}
	st.mark("kubernetes core")
	cl, cfg, err := MemberClient(c)
	if err != nil {
		return st.list, err
	}
	if len(o.CRDDirs) > 0 {
		for _, d := range o.CRDDirs {
			if _, err := os.Stat(d); err != nil {
				return st.list, fmt.Errorf("CRD directory %s is missing: run 'make crds' (upstream CRDs) or 'make generate' (ours): %w", d, err)
			}
		}
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: o.CRDDirs, ErrorIfPathMissing: true, MaxTime: 90 * time.Second}); err != nil {
			return st.list, fmt.Errorf("member %s: installing the CRDs of %v: %w", c.Name, o.CRDDirs, err)
		}
	}
	st.mark("crds")
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HyperbatchNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return st.list, fmt.Errorf("member %s: creating namespace %s: %w", c.Name, HyperbatchNamespace, err)
	}
	if err := createMemberNodes(ctx, cl, o.Nodes); err != nil {
		return st.list, fmt.Errorf("member %s: %w", c.Name, err)
	}
	if err := createMemberTree(ctx, cl, c, o.Nodes); err != nil {
		return st.list, fmt.Errorf("member %s: %w", c.Name, err)
	}
	st.mark("nodes Ready and HyperNodes")
	ca, err := os.ReadFile(c.PKI().CACert)
	if err != nil {
		return st.list, fmt.Errorf("reading %s: %w", c.PKI().CACert, err)
	}
	for _, obj := range VolcanoWebhookConfigs(Loopback(c.Ports().VolcanoWebhook), ca, "", nil) {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return st.list, fmt.Errorf("member %s: registering Volcano's webhook configuration %s: %w", c.Name, obj.GetName(), err)
		}
	}
	stage := Volcano(c, bin, true)
	if o.Hyperbatch {
		hb, err := Hyperbatch(c, bin, HyperbatchOptions{})
		if err != nil {
			return st.list, err
		}
		stage = append(stage, hb...)
	}
	if err := start(ctx, c, stage); err != nil {
		return st.list, err
	}
	for _, name := range []string{"root", "default"} {
		q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(name != "root")}}
		if err := cl.Create(ctx, q); err != nil && !apierrors.IsAlreadyExists(err) {
			return st.list, fmt.Errorf("member %s: creating Volcano Queue %s: %w", c.Name, name, err)
		}
	}
	st.mark(fmt.Sprintf("%v", stage.Names()))
	return st.list, nil
}

// MemberClient is an admin client of cluster c (core kinds, Volcano's Queues and HyperNodes).
func MemberClient(c Cluster) (client.Client, *rest.Config, error) {
	return ClusterClient(c, schedulingv1beta1.AddToScheme, topologyv1alpha1.AddToScheme)
}

// MemberNodeObject is the Node of a kwok node with GPUs.
func MemberNodeObject(n MemberNode) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		GPUResource:                     *resource.NewQuantity(n.GPUs, resource.DecimalSI),
	}
	labels := map[string]string{
		KwokNodeLabel:          KwokNodeLabelValue,
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(), Phase: corev1.NodeRunning,
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
}

// createMemberNodes creates the nodes and waits until kwok reports all of them Ready.
func createMemberNodes(ctx context.Context, c client.Client, nodes []MemberNode) error {
	for _, n := range nodes {
		if err := c.Create(ctx, MemberNodeObject(n)); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	var ready int
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var list corev1.NodeList
		if err := c.List(ctx, &list, client.MatchingLabels{KwokNodeLabel: KwokNodeLabelValue}); err != nil {
			return false, nil //nolint:nilerr // a failed list is retried until the timeout
		}
		ready = 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == len(nodes), nil
	})
	if err != nil {
		return fmt.Errorf("only %d of %d kwok nodes became Ready within 90s (kwok marks them Ready): %w", ready, len(nodes), err)
	}
	return nil
}

// createMemberTree creates one tier-1 HyperNode per leaf (its nodes as exact members) and a tier-2
// HyperNode over the leaves. Nodes without a leaf are in no HyperNode; no leaf, no tree.
func createMemberTree(ctx context.Context, c client.Client, cl Cluster, nodes []MemberNode) error {
	leaves := map[string][]string{}
	for _, n := range nodes {
		if n.Leaf != "" {
			leaves[n.Leaf] = append(leaves[n.Leaf], n.Name)
		}
	}
	if len(leaves) == 0 {
		return nil
	}
	names := make([]string, 0, len(leaves))
	for l := range leaves {
		names = append(names, l)
	}
	sort.Strings(names)
	hn := func(name string, tier int, typ topologyv1alpha1.MemberType, members []string) *topologyv1alpha1.HyperNode {
		h := &topologyv1alpha1.HyperNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: topologyv1alpha1.HyperNodeSpec{Tier: tier}}
		for _, m := range members {
			h.Spec.Members = append(h.Spec.Members, topologyv1alpha1.MemberSpec{Type: typ,
				Selector: topologyv1alpha1.MemberSelector{ExactMatch: &topologyv1alpha1.ExactMatch{Name: m}}})
		}
		return h
	}
	objs := []client.Object{hn(MemberTier2(cl), 2, topologyv1alpha1.MemberTypeHyperNode, names)}
	for _, l := range names {
		objs = append(objs, hn(l, 1, topologyv1alpha1.MemberTypeNode, leaves[l]))
	}
	var errs []error
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("creating HyperNode %s: %w", o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
