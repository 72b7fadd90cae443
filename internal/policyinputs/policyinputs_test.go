package policyinputs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func TestRead(t *testing.T) {
	ns := builders.Namespace("team", map[string]string{"team": "a"}, nil)
	pol := builders.MakePolicy("a").Selector("team", "a").AllowedQueues("team-a").Obj()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ns, pol).Build()
	in, err := Read(context.Background(), c, "team")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "a"}, in.Namespace.Labels)
	ref := defaults.QueueRefusal("gpu", in.Namespace, in.Policies)
	require.NotNil(t, ref, "the policy read applies")
	assert.Contains(t, ref.Error(), `WorkloadPolicy "a" allows only "team-a"`)
	assert.Nil(t, defaults.QueueRefusal("team-a", in.Namespace, in.Policies))

	_, err = Read(context.Background(), c, "missing")
	assert.ErrorContains(t, err, "reading namespace missing")
}
