package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// The multi-cluster layout (`make run-multicluster`): a Karmada plane in --dir with the port base,
// and two members in --dir/<name> with their own port blocks, memberPortStep apart.
const (
	planeName      = "karmada"
	memberPortStep = 100
)

// memberNodes are the members' kwok nodes: different accelerator capacity and different HyperNode
// trees. member1: 32 GPUs on 4 nodes of 8 under two leaves; member2: 8 GPUs on 2 nodes of 4 under
// one leaf.
var memberNodes = map[string][]localproc.MemberNode{
	"member1": {
		{Name: "m1-gpu-0", GPUs: 8, Leaf: "m1-leaf-0"}, {Name: "m1-gpu-1", GPUs: 8, Leaf: "m1-leaf-0"},
		{Name: "m1-gpu-2", GPUs: 8, Leaf: "m1-leaf-1"}, {Name: "m1-gpu-3", GPUs: 8, Leaf: "m1-leaf-1"},
	},
	"member2": {{Name: "m2-gpu-0", GPUs: 4, Leaf: "m2-leaf-0"}, {Name: "m2-gpu-1", GPUs: 4, Leaf: "m2-leaf-0"}},
}

func memberNames() []string {
	out := make([]string, 0, len(memberNodes))
	for n := range memberNodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// multiClusters are the plane and the members, in start order.
func (l layout) multiClusters() []localproc.Cluster {
	out := []localproc.Cluster{{Name: planeName, Dir: l.dir, PortBase: l.portBase, Role: localproc.RoleKarmada}}
	for i, name := range memberNames() {
		nodes := len(memberNodes[name])
		out = append(out, localproc.Cluster{Name: name, Dir: filepath.Join(l.dir, name), PortBase: l.portBase + (i+1)*memberPortStep,
			Role: localproc.RoleMember, Nodes: nodes})
	}
	return out
}

// multiclusterTools are what the plane and the members run besides requiredTools.
var multiclusterTools = append(append([]string{}, localproc.KarmadaTools...), "vc-controller-manager", "vc-webhook-manager")

// templateCRDDirs are the CRDs the plane serves: Volcano's (the templates Karmada propagates), the
// HyperJob's (hack/crds.sh) and hyperbatch's own (WorkloadPolicy).
func (l layout) templateCRDDirs() []string {
	return []string{filepath.Join(l.root, "_output", "crds", "volcano"), filepath.Join(l.root, "_output", "crds", "training"),
		filepath.Join(l.root, "config", "crd")}
}

// timing is one process's or step's startup time, for the summary `up` prints.
type timing struct {
	cluster, name string
	took          time.Duration
}

// upMulticluster brings up the plane, then each member, joins them, propagates the Queues and, unless
// noDemo, runs a HyperJob across both members to completion.
func (l layout) upMulticluster(ctx context.Context, s *localproc.Session, st localproc.State, o upOptions) error {
	for _, d := range l.templateCRDDirs() {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("CRD directory %s is missing: run `make crds` (hack/crds.sh) and `make generate`: %w", l.rel(d), err)
		}
	}
	moduleDir, err := localproc.KarmadaModuleDir(l.root)
	if err != nil {
		return err
	}
	var times []timing
	plane := st.Clusters[0]
	t := time.Now()
	steps, err := localproc.UpKarmadaPlane(ctx, plane, l.bin, localproc.KarmadaOptions{ModuleDir: moduleDir, TemplateCRDDirs: l.templateCRDDirs()}, s.StageStarter())
	if err != nil {
		return err
	}
	for _, sp := range steps {
		times = append(times, timing{plane.Name, sp.Name, sp.Took})
	}
	// hyperbatch's manager in control-plane mode: its webhooks on the Karmada apiserver (URL mode,
	// own CA and caBundle rotation), the HyperJob controller.
	hb, err := localproc.Hyperbatch(plane, l.bin, localproc.HyperbatchOptions{})
	if err != nil {
		return err
	}
	ts := time.Now()
	if err := s.Start(ctx, plane.Name, hb...); err != nil {
		return err
	}
	times = append(times, timing{plane.Name, "manager (control-plane mode)", time.Since(ts)})
	step("Karmada control plane up in %s", since(t))

	conf, err := localproc.DocumentedSchedulerConfig(l.root)
	if err != nil {
		return err
	}
	for _, m := range st.Clusters[1:] {
		t := time.Now()
		if err := localproc.WriteSchedulerConfig(conf, m.Kubeconfig(), m.SchedulerConfig()); err != nil {
			return err
		}
		steps, err := localproc.UpMember(ctx, m, l.bin, localproc.MemberOptions{
			Nodes:      memberNodes[m.Name],
			CRDDirs:    localproc.MemberCRDDirs(l.root),
			Hyperbatch: true,
			Root:       l.root,
		}, s.StageStarter())
		if err != nil {
			return err
		}
		for _, sp := range steps {
			times = append(times, timing{m.Name, sp.Name, sp.Took})
		}
		step("member %s up in %s", m.Name, since(t))
	}

	pc, _, err := localproc.KarmadaClient(plane)
	if err != nil {
		return err
	}
	t = time.Now()
	for _, m := range st.Clusters[1:] {
		cfg, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig())
		if err != nil {
			return fmt.Errorf("loading %s: %w", m.Kubeconfig(), err)
		}
		if err := localproc.JoinMember(ctx, pc, m.Name, cfg); err != nil {
			return err
		}
	}
	for _, m := range st.Clusters[1:] {
		c, err := localproc.WaitClusterReady(ctx, pc, m.Name, 2*time.Minute)
		if err != nil {
			return err
		}
		gpus := "?"
		if c.Status.ResourceSummary != nil {
			if q, ok := c.Status.ResourceSummary.Allocatable[localproc.GPUResource]; ok {
				gpus = q.String()
			}
		}
		step("member %s joined in Push mode, Ready (nvidia.com/gpu allocatable as Karmada sees it: %s)", m.Name, gpus)
	}
	times = append(times, timing{planeName, "members joined and Ready", time.Since(t)})
	mk, err := newMultiKube(plane, st.Clusters[1:])
	if err != nil {
		return err
	}
	if err := mk.propagateQueues(ctx); err != nil {
		return err
	}
	printTimings(times)
	if !o.noDemo {
		return mk.demoHyperJob(ctx)
	}
	return nil
}

func printTimings(times []timing) {
	step("startup times:")
	for _, t := range times {
		fmt.Printf("    %-8s %-70s %s\n", t.cluster, t.name, t.took.Round(100*time.Millisecond))
	}
}

// multiKube talks to the plane and the members as admin.
type multiKube struct {
	plane   client.Client
	members map[string]client.Client
	names   []string
}

func multiScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(batchv1alpha1.AddToScheme(s))
	utilruntime.Must(schedulingv1beta1.AddToScheme(s))
	utilruntime.Must(topologyv1alpha1.AddToScheme(s))
	utilruntime.Must(trainingv1alpha1.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.Install(s))
	utilruntime.Must(clusterv1alpha1.Install(s))
	return s
}

func newMultiKube(plane localproc.Cluster, members []localproc.Cluster) (*multiKube, error) {
	mk := &multiKube{members: map[string]client.Client{}}
	connect := func(c localproc.Cluster) (client.Client, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", c.Kubeconfig(), err)
		}
		return clientFor(cfg, c.Name)
	}
	var err error
	if mk.plane, err = connect(plane); err != nil {
		return nil, err
	}
	for _, m := range members {
		if mk.members[m.Name], err = connect(m); err != nil {
			return nil, err
		}
		mk.names = append(mk.names, m.Name)
	}
	return mk, nil
}

func clientFor(cfg *rest.Config, name string) (client.Client, error) {
	cfg.QPS, cfg.Burst = 100, 200
	c, err := client.New(cfg, client.Options{Scheme: multiScheme()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", name, err)
	}
	return c, nil
}

// queuePolicy is the ClusterPropagationPolicy that sends every Volcano Queue created on the plane to
// every member (as volcano-global's all-queue propagation does); demoQueue shows it working.
const (
	queuePolicy = "hyperbatch-volcano-queues"
	demoQueue   = "team-a"
)

// propagateQueues creates the Queue policy and a Queue on the plane and waits until every member has
// the Queue. The members' own root and default Queues (their Volcano installation's) stay local.
func (mk *multiKube) propagateQueues(ctx context.Context) error {
	t := time.Now()
	cpp := &policyv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: queuePolicy},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "Queue"}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}},
		},
	}
	if err := mk.plane.Create(ctx, cpp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterPropagationPolicy %s on the plane: %w", queuePolicy, err)
	}
	q := &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: demoQueue},
		Spec: schedulingv1beta1.QueueSpec{Weight: 1, Reclaimable: ptr.To(true), Parent: "root"}}
	if err := mk.plane.Create(ctx, q); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Queue %s on the plane: %w", demoQueue, err)
	}
	for _, m := range mk.names {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			var got schedulingv1beta1.Queue
			if err := mk.members[m].Get(ctx, client.ObjectKey{Name: demoQueue}, &got); err != nil {
				last = err.Error()
				return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("queue %s created on the plane did not reach member %s within 90s (last: %s; see `kubectl get clusterresourcebinding` on the plane): %w", demoQueue, m, last, err)
		}
	}
	step("Queue %s propagated from the plane to %s by ClusterPropagationPolicy %s (%s)", demoQueue, strings.Join(mk.names, ", "), queuePolicy, since(t))
	return nil
}

const demoNamespace = "hyperbatch-demo"

// childrenHint is the command that shows a HyperJob's children and their pods in a member: the
// children are Volcano Jobs, which a bare `get jobs` does not list (it names batch/v1 Jobs).
func childrenHint(kubectl, context, namespace string) string {
	return fmt.Sprintf("%s --context %s -n %s get jobs.batch.volcano.sh,pods", kubectl, context, namespace)
}

// demoHyperJob is the acceptance check: a HyperJob on the plane with two replicatedJobs (a: 2 children
// of 2 pods × 8 GPUs for member1, b: 1 child of 2 pods × 4 GPUs for member2), each child held to one
// leaf HyperNode (highestTierAllowed 1), in Queue team-a. hyperbatch's control-plane manager admits it
// and splits it, Karmada dispatches the children, hyperbatch-scheduler places each inside one leaf
// of its member, kwok completes the pods, and the HyperJob ends Completed on the plane.
func (mk *multiKube) demoHyperJob(ctx context.Context) error {
	t := time.Now()
	if err := mk.plane.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("demo: creating namespace %s on the plane: %w", demoNamespace, err)
	}
	rj := func(name string, replicas int32, cluster string, gpus int64) trainingv1alpha1.ReplicatedJob {
		pod := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			SchedulerName: schedulerName, RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector: map[string]string{localproc.KwokNodeLabel: localproc.KwokNodeLabelValue},
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{localproc.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}},
		}}
		return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas, ClusterNames: []string{cluster},
			TemplateSpec: batchv1alpha1.JobSpec{
				SchedulerName: schedulerName, Queue: demoQueue, MinAvailable: 2,
				NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: batchv1alpha1.HardNetworkTopologyMode, HighestTierAllowed: ptr.To(1)},
				Tasks:           []batchv1alpha1.TaskSpec{{Name: "worker", Replicas: 2, Template: pod}},
			}}
	}
	hj := &trainingv1alpha1.HyperJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: "demo"},
		Spec: trainingv1alpha1.HyperJobSpec{
			MaxDomains:     ptr.To[int32](2),
			ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{rj("a", 2, "member1", 8), rj("b", 1, "member2", 4)},
		},
	}
	if err := mk.plane.Create(ctx, hj); err != nil {
		return fmt.Errorf("demo: creating HyperJob %s/%s on the plane: %w", demoNamespace, hj.Name, err)
	}
	children := map[string]string{"demo-a-0": "member1", "demo-a-1": "member1", "demo-b-0": "member2"}
	// Where each child's pods ran, read while they exist (a finished child may be cleaned up).
	leaves := map[string]string{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var got trainingv1alpha1.HyperJob
		if err := mk.plane.Get(ctx, client.ObjectKeyFromObject(hj), &got); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
		}
		var conds []string
		for _, c := range got.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
		}
		last = strings.Join(conds, "; ")
		for child, member := range children {
			if leaves[child] != "" {
				continue
			}
			leaf, err := mk.childLeaf(ctx, member, child)
			if err != nil {
				return false, err
			}
			leaves[child] = leaf
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, "Completed"), nil
	})
	if err != nil {
		return fmt.Errorf("demo: HyperJob %s/demo not Completed on the plane within 3m (conditions: %s); look at the children in the members (%s) and the logs: %w",
			demoNamespace, last, childrenHint("kubectl", localproc.Cluster{Name: "member1"}.Context(), demoNamespace), err)
	}
	for _, child := range []string{"demo-a-0", "demo-a-1", "demo-b-0"} {
		if leaves[child] == "" {
			return fmt.Errorf("demo: never saw the pods of child %s bound in %s", child, children[child])
		}
		step("demo: child %s ran in %s inside HyperNode %s", child, children[child], leaves[child])
	}
	step("demo: HyperJob %s/demo Completed on the plane (%s)", demoNamespace, since(t))
	return nil
}

// childLeaf is the leaf HyperNode holding every pod of the member's Job child: "" while the child has
// no pods or some are not bound yet; an error when they span several leaves or another scheduler
// placed them.
func (mk *multiKube) childLeaf(ctx context.Context, member, child string) (string, error) {
	c := mk.members[member]
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(demoNamespace), client.MatchingLabels{batchv1alpha1.JobNameKey: child}); err != nil {
		return "", fmt.Errorf("demo: listing the pods of %s in %s: %w", child, member, err)
	}
	if len(pods.Items) == 0 {
		return "", nil
	}
	leafOf := map[string]string{}
	for _, n := range memberNodes[member] {
		leafOf[n.Name] = n.Leaf
	}
	leaves := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.SchedulerName != schedulerName {
			return "", fmt.Errorf("demo: pod %s of %s in %s has schedulerName %q, not %s", p.Name, child, member, p.Spec.SchedulerName, schedulerName)
		}
		if p.Spec.NodeName == "" {
			return "", nil
		}
		leaves[leafOf[p.Spec.NodeName]] = true
	}
	if len(leaves) != 1 {
		return "", errors.New("demo: the pods of " + child + " in " + member + " span several leaves")
	}
	for l := range leaves {
		return l, nil
	}
	return "", nil
}
