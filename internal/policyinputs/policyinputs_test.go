package policyinputs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

func TestConfirm(t *testing.T) {
	ns := builders.Namespace("team", nil, nil)
	ns.ResourceVersion = "10"
	a := builders.MakePolicy("a").Queue("qa").Obj()
	a.ResourceVersion = "11"
	b := builders.MakePolicy("b").Queue("qb").Obj()
	b.ResourceVersion = "12"
	c := func(objs ...client.Object) client.Client {
		out := make([]client.Object, len(objs))
		for i, o := range objs {
			out[i] = o.DeepCopyObject().(client.Object)
		}
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(out...).Build()
	}
	bumped := func(o client.Object) client.Object {
		o = o.DeepCopyObject().(client.Object)
		o.SetResourceVersion("99")
		return o
	}
	for _, tc := range []struct {
		name         string
		cached, live client.Client
		want         bool
	}{
		{name: "same", cached: c(ns, a, b), live: c(b, a, ns), want: true},
		{name: "policy missing from the cache", cached: c(ns, a), live: c(ns, a, b)},
		{name: "policy deleted since", cached: c(ns, a, b), live: c(ns, a)},
		{name: "policy changed since", cached: c(ns, a, b), live: c(ns, a, bumped(b))},
		{name: "namespace changed since", cached: c(ns, a, b), live: c(bumped(ns), a, b)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Read(context.Background(), tc.cached, "team")
			require.NoError(t, err)
			got, err := Confirm(context.Background(), tc.live, "team", in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := Read(context.Background(), c(a), "team")
	assert.ErrorContains(t, err, "reading namespace team")
}
