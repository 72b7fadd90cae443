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
		label.Source:         label.New,
		ibnetdiscover.Source: ibnetdiscover.New,
		ufm.Source:           ufm.New,
	}
}
