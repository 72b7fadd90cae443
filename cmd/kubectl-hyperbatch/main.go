// Command kubectl-hyperbatch is the kubectl plugin of hyperbatch (`kubectl hyperbatch ...`):
// policies, explain, topology and why. Install it with `go install ./cmd/kubectl-hyperbatch` or
// krew (plugins/hyperbatch.yaml); docs/cli.md has a transcript of each command.
package main

import (
	"os"

	"github.com/hyperbatch/hyperbatch/internal/cli/app"
)

func main() { os.Exit(app.Main()) }
