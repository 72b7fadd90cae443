package naming

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChildJobName(t *testing.T) {
	assert.Equal(t, "llm-trainer-12", ChildJobName("llm", "trainer", 12))
}

func TestCheckChildJobNames(t *testing.T) {
	long := strings.Repeat("h", 51)
	tests := []struct {
		name            string
		hyperJob, rj    string
		count           int
		wantErrContains string
	}{
		{name: "no children", hyperJob: long + "zzzzzzzz", rj: "trainer", count: 0},
		{name: "fits", hyperJob: "llm", rj: "trainer", count: 100},
		{name: "exactly 63", hyperJob: long, rj: "trainer-x", count: 10}, // long-trainer-x-9
		{name: "one too long", hyperJob: long, rj: "trainer-x", count: 12,
			wantErrContains: `the longest, "` + long + `-trainer-x-11", is 64 characters, more than 63: shorten the HyperJob name (51 characters) or the replicatedJob name (9 characters) by 1`},
		{name: "not a DNS subdomain", hyperJob: "llm", rj: "Trainer", count: 1,
			wantErrContains: `"llm-Trainer-0" is not a valid Volcano Job name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckChildJobNames(tc.hyperJob, tc.rj, tc.count)
			if tc.wantErrContains == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErrContains)
		})
	}
}
