// Package ufm is the discovery provider that reads an InfiniBand fabric from NVIDIA UFM's REST API
// (systems and links) and builds leaf, spine and core HyperNodes from it (package fabric).
// Credentials come from a Secret (keys username and password, as in Volcano); TLS verification is on
// unless config.insecureSkipVerify says otherwise.
package ufm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/fabric"
)

// Source is this provider's source name.
const Source = "ufm"

// Config is the provider's config block. endpoint and insecureSkipVerify are Volcano's; the rest are
// hyperbatch's additions.
type Config struct {
	Endpoint           string `json:"endpoint"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	// CAFile is a PEM bundle trusted in addition to the system's CAs (a UFM with its own CA).
	CAFile string `json:"caFile,omitempty"`
	// NodeLabel maps hosts to Nodes by a label (see the ibnetdiscover source).
	NodeLabel string `json:"nodeLabel,omitempty"`
	// Timeout bounds each request; default 30s.
	Timeout config.Duration `json:"timeout,omitempty"`
}

// Provider builds the ufm source's tree.
type Provider struct {
	*hypernode.Runner
	cfg      Config
	src      config.Source
	deps     hypernode.Deps
	interval time.Duration

	mu        sync.Mutex
	graph     *fabric.Graph
	fetchedAt time.Time
}

// NewProvider builds the provider from its config entry.
func NewProvider(src config.Source, deps hypernode.Deps) (*Provider, error) {
	var c Config
	if err := config.DecodeStrict(src.Config, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.Endpoint == "" {
		return nil, errors.New("config.endpoint is empty: set the UFM server's URL, e.g. https://ufm.example.com")
	}
	if src.Credentials == nil || src.Credentials.SecretRef == nil {
		return nil, errors.New("credentials.secretRef is missing: name the Secret with the UFM username and password")
	}
	if deps.Nodes == nil || deps.Kube == nil {
		return nil, errors.New("the ufm source needs a Node lister and a Kubernetes client")
	}
	if c.InsecureSkipVerify {
		deps.Log.Info("WARNING: config.insecureSkipVerify is true: the UFM server's certificate is not verified")
	}
	p := &Provider{cfg: c, src: src, deps: deps, interval: src.Period()}
	p.Runner = hypernode.NewRunner(Source, p.interval, p.Discover, deps.Log)
	if deps.OnNodeChange != nil {
		deps.OnNodeChange(func(_, _ *corev1.Node) { p.Trigger() })
	}
	return p, nil
}

// Discover implements hypernode.Discover. UFM is read at most once per interval (rounds triggered
// by Node changes reuse the last fabric); the credentials Secret is read on every fetch, so a
// rotated password takes effect at the next one.
func (p *Provider) Discover() ([]hypernode.Group, error) {
	if p.deps.NodesSynced != nil && !p.deps.NodesSynced() {
		return nil, errors.New("the Node informer has not synced yet")
	}
	p.mu.Lock()
	g, fresh := p.graph, time.Since(p.fetchedAt) < p.interval*9/10
	p.mu.Unlock()
	if g == nil || !fresh {
		var err error
		if g, err = p.fetch(); err != nil {
			return nil, err
		}
		st := g.Stats()
		p.deps.Log.Info("read the fabric from UFM", "switches", st.Switches, "hosts", st.Hosts, "links", st.Links, "skipped", g.Skipped)
		p.mu.Lock()
		p.graph, p.fetchedAt = g, time.Now()
		p.mu.Unlock()
	}
	nodes, err := p.deps.Nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	return g.Groups(fabric.NodeMatcher(nodes, p.cfg.NodeLabel)), nil
}

// Refresh makes the next round read UFM again.
func (p *Provider) Refresh() {
	p.mu.Lock()
	p.fetchedAt = time.Time{}
	p.mu.Unlock()
}

func (p *Provider) fetch() (*fabric.Graph, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := p.src.Credentials.SecretRef
	sec, err := p.deps.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading credentials Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	user, pass := string(sec.Data["username"]), string(sec.Data["password"])
	if user == "" || pass == "" {
		return nil, fmt.Errorf("credentials Secret %s/%s needs keys username and password", ref.Namespace, ref.Name)
	}
	var ca []byte
	if p.cfg.CAFile != "" {
		if ca, err = os.ReadFile(p.cfg.CAFile); err != nil {
			return nil, fmt.Errorf("reading config.caFile: %w", err)
		}
	}
	c, err := NewClient(ClientOptions{Endpoint: p.cfg.Endpoint, InsecureSkipVerify: p.cfg.InsecureSkipVerify, CAPEM: ca,
		Username: user, Password: pass, Timeout: time.Duration(p.cfg.Timeout)})
	if err != nil {
		return nil, err
	}
	return c.Fabric(ctx)
}
