// Package ibnetdiscover is the discovery provider that reads the text output of InfiniBand's
// `ibnetdiscover` from a file or a ConfigMap key, re-reads it when it changes, and builds leaf,
// spine and core HyperNodes from the fabric (package fabric).
package ibnetdiscover

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
)

// Source is this provider's source name.
const Source = "ibnetdiscover"

// Config is the provider's config block.
type Config struct {
	// File is a path to ibnetdiscover output, polled for changes every PollInterval.
	File string `json:"file,omitempty"`
	// ConfigMap names a ConfigMap key holding ibnetdiscover output, watched for changes.
	ConfigMap *ConfigMapKey `json:"configMap,omitempty"`
	// NodeLabel, when set, maps a host to the Node whose value of this label is the host name or
	// one of its HCA GUIDs; otherwise hosts match Nodes by name.
	NodeLabel string `json:"nodeLabel,omitempty"`
	// PollInterval is how often File is checked for a change; default 10s.
	PollInterval config.Duration `json:"pollInterval,omitempty"`
}

// ConfigMapKey names one key of a ConfigMap.
type ConfigMapKey struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// Provider builds the ibnetdiscover source's tree.
type Provider struct {
	*hypernode.Runner
	cfg  Config
	deps hypernode.Deps

	cmStop   chan struct{}
	cmStore  cache.Store
	cmSynced cache.InformerSynced

	mu         sync.Mutex
	lastSum    [32]byte
	lastGraph  *fabric.Graph
	fileStamp  string
	pollCancel context.CancelFunc
}

// NewProvider builds the provider from its config entry.
func NewProvider(src config.Source, deps hypernode.Deps) (*Provider, error) {
	var c Config
	if err := config.DecodeStrict(src.Config, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	switch {
	case (c.File == "") == (c.ConfigMap == nil):
		return nil, errors.New("config: set exactly one of file and configMap")
	case c.ConfigMap != nil && (c.ConfigMap.Namespace == "" || c.ConfigMap.Name == "" || c.ConfigMap.Key == ""):
		return nil, errors.New("config.configMap needs namespace, name and key")
	case c.PollInterval < 0:
		return nil, errors.New("config.pollInterval must not be negative")
	}
	if c.PollInterval == 0 {
		c.PollInterval = config.Duration(10 * time.Second)
	}
	if deps.Nodes == nil {
		return nil, errors.New("the ibnetdiscover source needs a Node lister")
	}
	if c.ConfigMap != nil && deps.Kube == nil {
		return nil, errors.New("config.configMap needs a Kubernetes client")
	}
	p := &Provider{cfg: c, deps: deps}
	p.Runner = hypernode.NewRunner(Source, src.Period(), p.Discover, deps.Log)
	if deps.OnNodeChange != nil {
		deps.OnNodeChange(func(_, _ *corev1.Node) { p.Trigger() })
	}
	return p, nil
}

// Start implements hypernode.Provider: it starts the file poll or the ConfigMap watch, then the
// rounds.
func (p *Provider) Start(eventCh chan<- hypernode.Event, replyCh <-chan hypernode.Reply, informer hypernode.HyperNodeInformer) error {
	if cm := p.cfg.ConfigMap; cm != nil {
		f := informers.NewSharedInformerFactoryWithOptions(p.deps.Kube, 0, informers.WithNamespace(cm.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cm.Name).String()
			}))
		inf := f.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { p.Trigger() },
			UpdateFunc: func(any, any) { p.Trigger() },
			DeleteFunc: func(any) { p.Trigger() },
		}); err != nil {
			return err
		}
		p.cmStop = make(chan struct{})
		p.cmStore, p.cmSynced = inf.GetStore(), inf.HasSynced
		f.Start(p.cmStop)
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		p.pollCancel = cancel
		go p.poll(ctx)
	}
	return p.Runner.Start(eventCh, replyCh, informer)
}

// Stop implements hypernode.Provider.
func (p *Provider) Stop() error {
	if p.cmStop != nil {
		close(p.cmStop)
	}
	if p.pollCancel != nil {
		p.pollCancel()
	}
	return p.Runner.Stop()
}

// poll triggers a round when the file's size or modification time changes.
func (p *Provider) poll(ctx context.Context) {
	t := time.NewTicker(time.Duration(p.cfg.PollInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st, err := os.Stat(p.cfg.File)
			stamp := "missing"
			if err == nil {
				stamp = fmt.Sprintf("%d/%d", st.Size(), st.ModTime().UnixNano())
			}
			p.mu.Lock()
			changed := p.fileStamp != "" && p.fileStamp != stamp
			p.fileStamp = stamp
			p.mu.Unlock()
			if changed {
				p.Trigger()
			}
		}
	}
}

// read returns the current ibnetdiscover output.
func (p *Provider) read() ([]byte, error) {
	if cm := p.cfg.ConfigMap; cm != nil {
		if !p.cmSynced() {
			return nil, errors.New("the ConfigMap watch has not synced yet")
		}
		o, ok, err := p.cmStore.GetByKey(cm.Namespace + "/" + cm.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s/%s does not exist", cm.Namespace, cm.Name)
		}
		c := o.(*corev1.ConfigMap)
		if v, ok := c.Data[cm.Key]; ok {
			return []byte(v), nil
		}
		if v, ok := c.BinaryData[cm.Key]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("ConfigMap %s/%s has no key %q", cm.Namespace, cm.Name, cm.Key)
	}
	b, err := os.ReadFile(p.cfg.File)
	if err != nil {
		return nil, fmt.Errorf("reading config.file: %w", err)
	}
	return b, nil
}

// Discover implements hypernode.Discover. The output is parsed again only when its content changed.
func (p *Provider) Discover() ([]hypernode.Group, error) {
	if p.deps.NodesSynced != nil && !p.deps.NodesSynced() {
		return nil, errors.New("the Node informer has not synced yet")
	}
	b, err := p.read()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.mu.Lock()
	g := p.lastGraph
	if g == nil || sum != p.lastSum {
		if g, err = Parse(bytes.NewReader(b)); err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("parsing ibnetdiscover output: %w", err)
		}
		p.lastGraph, p.lastSum = g, sum
		st := g.Stats()
		p.deps.Log.Info("parsed ibnetdiscover output", "switches", st.Switches, "hosts", st.Hosts, "links", st.Links, "skipped", g.Skipped)
	}
	p.mu.Unlock()
	nodes, err := p.deps.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return g.Groups(fabric.NodeMatcher(nodes, p.cfg.NodeLabel)), nil
}
