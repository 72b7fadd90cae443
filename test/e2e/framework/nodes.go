package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

// NodesEnv chooses the nodes the suite's workload pods run on: "kwok" (the default: the local
// cluster's simulated nodes, where a pod "runs" because a kwok stage says so) or "real" (kubelets with
// a container runtime: hack/localcluster's real nodes, or kind's workers).
const NodesEnv = "HYPERBATCH_E2E_NODES"

// NodeKind is a value of NodesEnv.
type NodeKind string

const (
	// KwokNodes are the simulated nodes hack/localcluster creates (label type=kwok).
	KwokNodes NodeKind = "kwok"
	// RealNodes are nodes with a kubelet and a container runtime, labelled RealNodeLabel=RealNodeValue.
	RealNodes NodeKind = "real"
)

// RealNodeLabel=RealNodeValue marks the nodes that run the suite's workloads when NodesEnv is "real":
// hack/localcluster's real-node kubelets register with it, test/kind's workers carry it. On another
// cluster, label the worker nodes with it (`kubectl label node NAME hyperbatch.dev/e2e-node=real`).
const (
	RealNodeLabel = "hyperbatch.dev/e2e-node"
	RealNodeValue = "real"
)

// WorkerImage is the workload image of real nodes (`make images` builds it and loads it into the
// cluster's containerd): a worker that prints its rank and peers and, without arguments, exits 0 at
// once, as a kwok pod completes at once.
const WorkerImage = "hyperbatch.local/worker:dev"

// HyperbatchImage is hyperbatch's own image on real nodes (/manager and /scheduler, as the
// Dockerfile's; `make images` loads it into the cluster's containerd).
const HyperbatchImage = "hyperbatch.local/hyperbatch:dev"

// kwokImage is never pulled: kwok runs no container.
const kwokImage = "registry.k8s.io/pause:3.10"

// Nodes is where workload pods go and what they run: the node selector and tolerations to put in
// their pod spec, and the container image.
type Nodes struct {
	Kind        NodeKind
	Selector    map[string]string
	Tolerations []corev1.Toleration
	Image       string
}

// ParseNodes reads NodesEnv's value ("" is kwok).
func ParseNodes(v string) (Nodes, error) {
	switch NodeKind(v) {
	case "", KwokNodes:
		return Nodes{
			Kind:     KwokNodes,
			Selector: map[string]string{localproc.KwokNodeLabel: localproc.KwokNodeLabelValue},
			// The local cluster's kwok nodes carry no taint; this keeps the pods valid where they do
			// (kwok's own examples taint kwok.x-k8s.io/node=fake:NoSchedule).
			Tolerations: []corev1.Toleration{{Key: localproc.KwokNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Image:       kwokImage,
		}, nil
	case RealNodes:
		return Nodes{Kind: RealNodes, Selector: map[string]string{RealNodeLabel: RealNodeValue}, Image: WorkerImage}, nil
	}
	return Nodes{}, fmt.Errorf("%s=%q: want %q (simulated nodes, the default) or %q (nodes labelled %s=%s with a container runtime)",
		NodesEnv, v, KwokNodes, RealNodes, RealNodeLabel, RealNodeValue)
}

// Workload is the node choice of this run (NodesEnv). Setup has already refused a bad value, so a
// test never sees the panic.
func Workload() Nodes {
	n, err := ParseNodes(os.Getenv(NodesEnv))
	if err != nil {
		panic(err)
	}
	return n
}

// Simulated reports whether workload pods land on kwok nodes (no container runs).
func (n Nodes) Simulated() bool { return n.Kind == KwokNodes }

// Apply puts the node selector and tolerations into spec (keeping what spec already has).
func (n Nodes) Apply(spec *corev1.PodSpec) {
	if len(n.Selector) > 0 && spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	for k, v := range n.Selector {
		spec.NodeSelector[k] = v
	}
	spec.Tolerations = append(spec.Tolerations, n.Tolerations...)
}

// RunningContainer is a container that runs for d on this node choice: the worker image with
// --duration on real nodes; on kwok nodes the pause image, which runs no process (how long a kwok pod
// runs is up to kwok's stages and the hold annotation, not the container).
func (n Nodes) RunningContainer(name string, d time.Duration) corev1.Container {
	ctr := corev1.Container{Name: name, Image: n.Image}
	if !n.Simulated() {
		ctr.Args = []string{"--duration", d.String()}
	}
	return ctr
}

// PodSpecYAML is the node selector and tolerations as pod-spec lines for an inline manifest, each
// line indented by indent spaces and ending in a newline ("" when there is nothing to select).
func (n Nodes) PodSpecYAML(indent int) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	// JSON is YAML: flow style keeps each field on one line at any indent.
	if len(n.Selector) > 0 {
		sel, _ := json.Marshal(n.Selector) // a map of strings always marshals
		fmt.Fprintf(&b, "%snodeSelector: %s\n", pad, sel)
	}
	if len(n.Tolerations) > 0 {
		tol, _ := json.Marshal(n.Tolerations)
		fmt.Fprintf(&b, "%stolerations: %s\n", pad, tol)
	}
	return b.String()
}

// SkipUnlessSimulated skips t on real nodes: for checks that need what only kwok nodes have (8 GPUs
// each, 32 CPUs, a pod completing without running). why names that need.
func SkipUnlessSimulated(t interface {
	Helper()
	Skipf(string, ...any)
}, why string) {
	t.Helper()
	if n := Workload(); !n.Simulated() {
		t.Skipf("%s=%s: this check needs kwok nodes (%s)", NodesEnv, n.Kind, why)
	}
}

// SkipUnlessReal skips t on kwok nodes: for checks whose pods must really run (a container exits,
// a log is read from the kubelet). why names that need.
func SkipUnlessReal(t interface {
	Helper()
	Skipf(string, ...any)
}, why string) {
	t.Helper()
	if n := Workload(); n.Simulated() {
		t.Skipf("%s=%s: this check needs real nodes (%s); run it with %s=%s against a cluster with real nodes (make run REAL_NODES=2)", NodesEnv, n.Kind, why, NodesEnv, RealNodes)
	}
}

// checkNodes fails when no Ready node of the cluster matches the node choice, naming the label.
func checkNodes(ctx context.Context, c client.Client, n Nodes) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels(n.Selector)); err != nil {
		return fmt.Errorf("listing the nodes for %s=%s: %w", NodesEnv, n.Kind, err)
	}
	for _, node := range nodes.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
	}
	fix := "start the local cluster with kwok nodes (the default)"
	if n.Kind == RealNodes {
		fix = fmt.Sprintf("point %s at a cluster whose worker nodes carry %s=%s", KubeconfigEnv, RealNodeLabel, RealNodeValue)
	}
	return fmt.Errorf("%s=%s: no Ready node carries %v (%d match, none Ready); %s", NodesEnv, n.Kind, n.Selector, len(nodes.Items), fix)
}
