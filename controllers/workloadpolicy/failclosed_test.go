package workloadpolicy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// TestFailClosedNote: the Ready=False message of an invalid policy says what still applies.
func TestFailClosedNote(t *testing.T) {
	assert.Equal(t, "; until it is fixed, its defaults apply to no namespace", failClosedNote(builders.MakePolicy("p").Queue("q").Obj()))
	note := failClosedNote(builders.MakePolicy("p").AllowedQueues("q").Obj())
	assert.Contains(t, note, "its allowedQueues and allowedClusters apply to every namespace not governed by a valid policy ranked above it")
	assert.Contains(t, note, "they fail closed")
	assert.Contains(t, failClosedNote(builders.MakePolicy("p").AllowedClusters("c").Obj()), "fail closed")
}
