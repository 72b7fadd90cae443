package app

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
)

// A missing or extra argument, an unknown command or flag exits 2 (docs/cli.md, Exit codes), and
// says what the command takes; none of these reaches the cluster.
func TestBadArgumentsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"why"},
		{"why", "a", "b"},
		{"explain"},
		{"explain", "pod/a", "pod/b"},
		{"topology", "extra"},
		{"policies", "extra"},
		{"bogus"},
		{"why", "--bogus", "a"},
	} {
		var out, errOut bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
		cmd.SetArgs(args)
		err := cmd.Execute()
		assert.Equal(t, exitcode.Usage, exitcode.Of(err), "%v: %v", args, err)
	}
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"why", "a", "b"})
	assert.ErrorContains(t, cmd.Execute(), "accepts 1 arg(s), received 2; usage: kubectl-hyperbatch why GANG")
}
