package hyperjob

import (
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func binding(child string, clusters ...string) workv1alpha2.ResourceBinding {
	rb := workv1alpha2.ResourceBinding{}
	rb.Name = child + "-job"
	rb.Spec.Resource = workv1alpha2.ObjectReference{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: child}
	for _, c := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c})
	}
	return rb
}

func suspendedPP(name string, dispatching *bool) *policyv1alpha1.PropagationPolicy {
	pp := &policyv1alpha1.PropagationPolicy{}
	pp.Name = name
	if dispatching != nil {
		pp.Spec.Suspension = &policyv1alpha1.Suspension{Dispatching: dispatching}
	}
	return pp
}

// The children are held back until every one has a scheduled cluster, then released together,
// once; a HyperJob released before stays released.
func TestDecideDispatch(t *testing.T) {
	hj := twoByTwo() // children hj-a-0, hj-a-1, hj-b-0, hj-b-1
	p := plan(t, hj)
	held := map[string]*policyv1alpha1.PropagationPolicy{}
	for _, n := range []string{"hj-a-0", "hj-a-1", "hj-b-0", "hj-b-1"} {
		held[n] = suspendedPP(n, ptr.To(true))
	}
	three := bindingsByChild([]workv1alpha2.ResourceBinding{binding("hj-a-0", "member1"), binding("hj-a-1", "member1"),
		binding("hj-b-0", "member2"), binding("hj-b-1")})

	d := decideDispatch(p, nil, held, three)
	assert.False(t, d.release, "hj-b-1's binding has no cluster yet")
	assert.Equal(t, []string{"hj-b-1"}, d.waiting)
	d = decideDispatch(p, nil, nil, nil)
	assert.False(t, d.release, "a new HyperJob (no policy, no binding) is held")

	// A finished child that is gone needs no cluster.
	d = decideDispatch(p, map[string]bool{"hj-b-1": true}, held, three)
	assert.True(t, d.release)
	assert.True(t, d.releasing)

	all := bindingsByChild([]workv1alpha2.ResourceBinding{binding("hj-a-0", "member1"), binding("hj-a-1", "member1"),
		binding("hj-b-0", "member2"), binding("hj-b-1", "member2"), binding("other", "member9")})
	d = decideDispatch(p, nil, held, all)
	require.True(t, d.release)
	assert.True(t, d.releasing, "this pass lifts the suspension")
	assert.Equal(t, "member1: 2 (hj-a-0, hj-a-1); member2: 2 (hj-b-0, hj-b-1)", releaseMessage(d.clusters))

	// Released before (a policy without suspension): stays released, no second Event, even for a
	// child added later that has no cluster yet.
	released := map[string]*policyv1alpha1.PropagationPolicy{"hj-a-0": suspendedPP("hj-a-0", nil)}
	d = decideDispatch(p, nil, released, three)
	assert.True(t, d.release)
	assert.False(t, d.releasing)
}

func TestSuspendIsDrift(t *testing.T) {
	hj := twoByTwo()
	p := plan(t, hj)
	q := plan(t, hj)
	c := p.children[0]
	suspend(&c)
	assert.Equal(t, q.children[0].ppHash, c.ppHash, "the hash label names the placement, not the hold")
	assert.Equal(t, c.ppHash, c.pp.Labels[hbv1.PPSpecHashLabel])
	assert.True(t, suspended(c.pp))
	assert.False(t, suspended(p.children[1].pp), "only that child's policy")
	assert.True(t, ppDrifted(c.pp, q.children[0].pp), "a lifted or added suspension is applied")
	assert.True(t, ppDrifted(q.children[0].pp, c.pp))
}
