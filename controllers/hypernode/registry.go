package hypernode

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/hyperbatch/hyperbatch/controllers/hypernode/config"
)

// Registry maps a source name to its provider's constructor. Providers are compiled in and
// registered by name: a Go plugin (.so) must be built with the exact same toolchain, flags and
// versions of every shared package as the manager, cannot be unloaded, and does not exist on
// statically linked or non-Linux builds, so a plugin ABI would be a promise the project cannot keep.
// A new provider is a package that implements Provider plus one line in providers.Builtin.
type Registry map[string]Constructor

// Constructor builds a provider from its config entry. It checks the entry (the config block with
// config.DecodeStrict) and fails with an error naming the field.
type Constructor func(src config.Source, deps Deps) (Provider, error)

// Adapt turns a constructor that returns a concrete provider type into a Constructor.
func Adapt[P Provider](f func(config.Source, Deps) (P, error)) Constructor {
	return func(src config.Source, deps Deps) (Provider, error) {
		p, err := f(src, deps)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Deps are what the framework gives a provider.
type Deps struct {
	// Nodes lists the cluster's Nodes (name and labels only) from the framework's informer.
	Nodes corelisters.NodeLister
	// NodesSynced reports whether Nodes has its initial list.
	NodesSynced cache.InformerSynced
	// OnNodeChange registers fn to run when a Node is added, deleted or relabelled.
	OnNodeChange func(fn func(old, cur *corev1.Node))
	// Kube reads what a provider needs directly (a credentials Secret, a ConfigMap).
	Kube kubernetes.Interface
	// Log is the provider's logger.
	Log logr.Logger
	// Events records Kubernetes Events where an operator would look (a Node with conflicting
	// labels); nil records none.
	Events record.EventRecorder
}

// Names lists the registered sources.
func (r Registry) Names() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the provider of src.
func (r Registry) New(src config.Source, deps Deps) (Provider, error) {
	c, ok := r[src.Source]
	if !ok {
		return nil, fmt.Errorf("source %q has no provider; this build has %s", src.Source, strings.Join(r.Names(), ", "))
	}
	p, err := c(src, deps)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Source, err)
	}
	if p.Name() != src.Source {
		return nil, fmt.Errorf("source %s: its provider names itself %q", src.Source, p.Name())
	}
	return p, nil
}
