package hypernode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	vcclientset "volcano.sh/apis/pkg/client/clientset/versioned"
	vcinformers "volcano.sh/apis/pkg/client/informers/externalversions"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
)

// The discovery controller reads Nodes (label and fabric providers), writes HyperNodes, reads the
// UFM credentials Secret and an ibnetdiscover ConfigMap named in its configuration.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=topology.volcano.sh,resources=hypernodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// replyBuffer is the capacity of each provider's reply channel; the writer never blocks on it.
const replyBuffer = 16

// Controller runs the configured providers and writes their events. It is a manager Runnable that
// runs only on the elected leader.
type Controller struct {
	log       logr.Logger
	vc        vcclientset.Interface
	kube      kubernetes.Interface
	providers []Provider
	nodes     informers.SharedInformerFactory
	hns       vcinformers.SharedInformerFactory
	view      *view
	// Backoff of each write; writeBackoff unless a test shortens it.
	backoff func() (steps int, first time.Duration)
}

// Options configure New.
type Options struct {
	// Config is the discovery configuration; only its enabled sources run.
	Config *config.File
	// Registry holds the providers this build has.
	Registry Registry
	// Log is the controller's logger.
	Log logr.Logger
	// Events is given to the providers (Deps.Events); nil records none.
	Events record.EventRecorder
	// WriteRetries and WriteRetryDelay shorten the write backoff (tests); zero keeps 5 tries from 200ms.
	WriteRetries    int
	WriteRetryDelay time.Duration
}

// New builds the controller and every enabled provider, so a configuration error stops the manager
// at start with the field named.
func New(cfg *rest.Config, o Options) (*Controller, error) {
	if o.Config == nil {
		return nil, errors.New("hypernode discovery needs a configuration")
	}
	registerMetrics()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	vc, err := vcclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Volcano client: %w", err)
	}
	c := &Controller{log: o.Log, vc: vc, kube: kube}
	c.nodes = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trimNode))
	c.hns = vcinformers.NewSharedInformerFactory(vc, 0)
	nodeInf := c.nodes.Core().V1().Nodes()
	if c.view, err = newView(c.hns.Topology().V1alpha1().HyperNodes().Informer()); err != nil {
		return nil, err
	}
	deps := Deps{
		Nodes:       nodeInf.Lister(),
		NodesSynced: nodeInf.Informer().HasSynced,
		Kube:        kube,
		Events:      o.Events,
		OnNodeChange: func(fn func(old, cur *corev1.Node)) {
			_, _ = nodeInf.Informer().AddEventHandler(nodeHandler(fn))
		},
	}
	var errs []error
	for _, src := range o.Config.Enabled() {
		deps.Log = o.Log.WithValues("source", src.Source)
		p, err := o.Registry.New(src, deps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.providers = append(c.providers, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("discovery config: %w", err)
	}
	steps, delay := o.WriteRetries, o.WriteRetryDelay
	c.backoff = func() (int, time.Duration) { return steps, delay }
	return c, nil
}

// Nodes is the Node lister given to providers (tests wait on it).
func (c *Controller) Nodes() corelisters.NodeLister { return c.nodes.Core().V1().Nodes().Lister() }

// Providers are the running providers (tests and benchmarks drive their rounds).
func (c *Controller) Providers() []Provider { return c.providers }

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader writes HyperNodes.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it starts the informers, waits for them, starts one writer and
// one provider per source, and stops the providers when ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.nodes.Start(ctx.Done())
	c.hns.Start(ctx.Done())
	for typ, ok := range c.nodes.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("waiting for the %v informer", typ)
		}
	}
	for typ, ok := range c.hns.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("waiting for the %v informer (is the HyperNode CRD installed?)", typ)
		}
	}
	if ctx.Err() != nil {
		return nil //nolint:nilerr // stopped before the informers synced: a clean shutdown, not a failure
	}
	for _, p := range c.providers {
		eventCh := make(chan Event)
		replyCh := make(chan Reply, replyBuffer)
		w := &writer{source: p.Name(), client: c.vc.TopologyV1alpha1().HyperNodes(), view: c.view,
			log: c.log.WithValues("source", p.Name()), backoff: writeBackoff}
		if steps, delay := c.backoff(); steps > 0 {
			w.backoff.Steps, w.backoff.Duration = steps, delay
		}
		go w.run(ctx, eventCh, replyCh)
		if err := p.Start(eventCh, replyCh, c.view); err != nil {
			return fmt.Errorf("starting discovery source %s: %w", p.Name(), err)
		}
		c.log.Info("discovery source started", "source", p.Name())
	}
	<-ctx.Done()
	for _, p := range c.providers {
		if err := p.Stop(); err != nil {
			c.log.Error(err, "stopping discovery source", "source", p.Name())
		}
	}
	return nil
}

// trimNode keeps only what providers read of a Node (name, UID, labels), so 10,000 Nodes cost
// little memory.
func trimNode(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}, nil
}

// nodeHandler calls fn on Node adds, deletes and label changes.
func nodeHandler(fn func(old, cur *corev1.Node)) cache.ResourceEventHandler {
	node := func(o any) *corev1.Node {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		n, _ := o.(*corev1.Node)
		return n
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { fn(nil, node(o)) },
		UpdateFunc: func(o, n any) {
			a, b := node(o), node(n)
			if a != nil && b != nil && !maps.Equal(a.Labels, b.Labels) {
				fn(a, b)
			}
		},
		DeleteFunc: func(o any) { fn(node(o), nil) },
	}
}
