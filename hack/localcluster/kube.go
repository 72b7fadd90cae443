package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	topologyv1alpha1 "volcano.sh/apis/pkg/apis/topology/v1alpha1"

	"github.com/hyperbatch/hyperbatch/test/util/localproc"
)

const (
	systemNamespace = "hyperbatch-system"
	schedulerName   = "hyperbatch-scheduler"
	demoPodName     = "hyperbatch-smoke"
	createWorkers   = 32
)

// kube talks to the local API server as admin.
type kube struct {
	cl localproc.Cluster
	c  client.Client
}

func newKube(cl localproc.Cluster) (*kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", cl.Kubeconfig(), err)
	}
	// Creating thousands of objects: the admin (system:masters) is exempt from API priority and
	// fairness, so only the client-side limiter needs lifting.
	cfg.QPS, cfg.Burst = 1000, 2000
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(topologyv1alpha1.AddToScheme(s))
	utilruntime.Must(batchv1alpha1.AddToScheme(s))
	utilruntime.Must(schedulingv1beta1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	return &kube{cl: cl, c: c}, nil
}

// createTopology creates the system namespace, the kwok nodes and (unless discovery builds it) the
// HyperNode tree, then waits until kwok reports every node Ready.
func (k *kube) createTopology(ctx context.Context, t topology, hyperNodes bool) error {
	begin := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}
	if err := k.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", systemNamespace, err)
	}
	if err := k.c.List(ctx, &topologyv1alpha1.HyperNodeList{}, client.Limit(1)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return errors.New("the HyperNode CRD (hypernodes.topology.volcano.sh) is not installed: hack/crds.sh should generate it into _output/crds/ (controller-gen, from volcano.sh/apis in the module cache); run hack/crds.sh and retry")
		}
		return fmt.Errorf("listing HyperNodes: %w", err)
	}

	err := parallel(ctx, len(t.Nodes), func(ctx context.Context, i int) error {
		return createIgnoringExisting(ctx, k.c, nodeObject(t.Nodes[i]))
	})
	if err != nil {
		return fmt.Errorf("creating nodes: %w", err)
	}
	step("created %d kwok nodes (%s)", len(t.Nodes), since(begin))

	if !hyperNodes {
		step("HyperNodes: left to the manager's discovery (--discover), from the nodes' %s, %s and %s labels", labelLeaf, labelSpine, labelTop)
		return k.waitNodesReady(ctx, len(t.Nodes))
	}
	begin = time.Now()
	groups := t.groups()
	err = parallel(ctx, len(groups), func(ctx context.Context, i int) error {
		return createIgnoringExisting(ctx, k.c, hyperNodeObject(groups[i]))
	})
	if err != nil {
		return fmt.Errorf("creating HyperNodes: %w", err)
	}
	step("created %d HyperNodes: %d leaves (tier 1), %d spines (tier 2), 1 top (tier 3) (%s)",
		len(groups), len(t.Leaves), len(t.Spines), since(begin))

	return k.waitNodesReady(ctx, len(t.Nodes))
}

func createIgnoringExisting(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w", obj.GetName(), err)
	}
	return nil
}

// parallel runs fn for 0..n-1 on createWorkers goroutines and returns the first error.
func parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for w := 0; w < min(createWorkers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return firstErr
}

func (k *kube) waitNodesReady(ctx context.Context, want int) error {
	begin := time.Now()
	timeout := 60*time.Second + time.Duration(want)*30*time.Millisecond
	ready := 0
	for {
		var nodes corev1.NodeList
		if err := k.c.List(ctx, &nodes, client.MatchingLabels{kwokNodeLabel: kwokNodeLabelValue}); err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		ready = 0
		for i := range nodes.Items {
			if nodeReady(&nodes.Items[i]) {
				ready++
			}
		}
		if ready >= want {
			step("%d nodes Ready (%s)", ready, since(begin))
			return nil
		}
		if time.Since(begin) > timeout {
			return fmt.Errorf("only %d of %d kwok nodes became Ready within %s: kwok marks them Ready.\n%s",
				ready, want, timeout.Round(time.Second), logTail(k.cl.LogFile("kwok")))
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted while waiting for nodes to become Ready")
		case <-time.After(time.Second):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitDefaultServiceAccount waits for default/default: the ServiceAccount admission plugin rejects pods
// until kube-controller-manager's serviceaccount-controller has created it.
func (k *kube) waitDefaultServiceAccount(ctx context.Context) error {
	const timeout = 60 * time.Second
	deadline := time.Now().Add(timeout)
	for {
		err := k.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading ServiceAccount default/default: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ServiceAccount default/default was not created within %s: kube-controller-manager's serviceaccount-controller creates it.\n%s",
				timeout, logTail(k.cl.LogFile("kube-controller-manager")))
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

// demo is the local cluster's acceptance check: a pod for hyperbatch-scheduler must be bound to a kwok
// node (the scheduler works) and reach Running (kwok's pod stages work).
func (k *kube) demo(ctx context.Context) error {
	begin := time.Now()
	const timeout = 90 * time.Second
	deadline := time.Now().Add(timeout)
	pod := demoPod() // etcd starts empty on every up, so the name is free
	if err := k.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("demo: creating pod default/%s: %w", demoPodName, err)
	}
	for {
		var p corev1.Pod
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return fmt.Errorf("demo: reading pod default/%s: %w", demoPodName, err)
		}
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			step("demo passed: pod default/%s was bound by %s to %s and is Running (%s)",
				demoPodName, schedulerName, p.Spec.NodeName, since(begin))
			return nil
		}
		if time.Now().After(deadline) {
			if p.Spec.NodeName == "" {
				return fmt.Errorf("demo failed: pod default/%s was not bound by %s within %s (%s).\n%s",
					demoPodName, schedulerName, timeout, scheduledMessage(&p), logTail(k.cl.LogFile("scheduler")))
			}
			return fmt.Errorf("demo failed: pod default/%s was bound to %s but is %s, not Running, after %s: kwok's pod stages did not run.\n%s",
				demoPodName, p.Spec.NodeName, p.Status.Phase, timeout, logTail(k.cl.LogFile("kwok")))
		}
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

func demoPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default",
			Name:      demoPodName,
			Labels:    map[string]string{"app.kubernetes.io/name": demoPodName, managedByLabel: managedByValue},
		},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			NodeSelector:  map[string]string{kwokNodeLabel: kwokNodeLabelValue},
			// The kwok nodes carry no taint; this toleration keeps the pod valid if they ever do.
			Tolerations: []corev1.Toleration{{
				Key: kwokNodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			}},
			Containers: []corev1.Container{{
				Name:  "pause",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}
}

func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no PodScheduled condition: the scheduler has not looked at the pod"
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return errors.New("interrupted")
	case <-time.After(d):
		return nil
	}
}
