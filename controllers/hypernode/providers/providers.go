// Package providers registers the built-in discovery providers by source name.
package providers

import (
	"github.com/hyperbatch/hyperbatch/controllers/hypernode"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ibnetdiscover"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/label"
	"github.com/hyperbatch/hyperbatch/controllers/hypernode/providers/ufm"
)

// Builtin returns the registry of the providers compiled into hyperbatch.
func Builtin() hypernode.Registry {
	return hypernode.Registry{
		label.Source:         hypernode.Adapt(label.NewProvider),
		ibnetdiscover.Source: hypernode.Adapt(ibnetdiscover.NewProvider),
		ufm.Source:           hypernode.Adapt(ufm.NewProvider),
	}
}
