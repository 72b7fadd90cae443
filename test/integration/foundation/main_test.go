package foundation

import (
	"fmt"
	"os"
	"testing"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	env, err = framework.Start(framework.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration control plane did not start: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
	}
	os.Exit(code)
}
