package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --excluded-namespaces adds to kube-system and hyperbatch's own namespace; a name that is not a
// namespace is refused with the flag's name and an example.
func TestExcludedNamespaces(t *testing.T) {
	got, err := excludedNamespaces("hyperbatch-system", " monitoring,,ingress-nginx,kube-system ")
	require.NoError(t, err)
	assert.Equal(t, []string{"kube-system", "hyperbatch-system", "monitoring", "ingress-nginx"}, got)

	got, err = excludedNamespaces("hb", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"kube-system", "hb"}, got)

	_, err = excludedNamespaces("hb", "monitoring,Bad_NS")
	require.ErrorContains(t, err, `--excluded-namespaces: "Bad_NS" is not a namespace name`)
}
