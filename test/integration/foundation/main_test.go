package foundation

import (
	"os"
	"testing"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	os.Exit(framework.RunMain(m, &env))
}
