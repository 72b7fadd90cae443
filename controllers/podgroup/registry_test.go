package podgroup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The kinds the registry says hyperbatch makes the PodGroup of are the kinds this controller serves.
func TestCheckRegistry(t *testing.T) {
	assert.NoError(t, CheckRegistry())
}
