package why_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/exitcode"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// now is a fixed reference time inside the recording's hour, so deadlines read the same every run.
func now(t *testing.T) time.Time {
	t.Helper()
	n, err := time.Parse(time.RFC3339, "2026-11-24T22:16:00Z")
	require.NoError(t, err)
	return n
}

// A gang waiting for a tier (recorded): 5 pods of 8 GPUs under highestTierAllowed=1, leaf-0 full of
// two other gangs; the scheduler's numbers per tier and its suggestions.
func TestWaitingForATier(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	assert.Equal(t, "Volcano Job default/too-big", owner)
	r := why.Build(s, pg, owner, now(t))
	assert.True(t, r.Waits())
	assert.Equal(t, "Inqueue", r.Phase)
	require.NotNil(t, r.Placement)
	p := r.Placement
	assert.Equal(t, "highestTierAllowed=1", p.Limit)
	assert.Equal(t, gangcontract.Amounts{Pods: 5, Resources: map[string]string{"cpu": "20", "nvidia.com/gpu": "40"}}, p.Need)
	require.Len(t, p.Tiers, 3)
	assert.Equal(t, 1, p.Tiers[0].Tier)
	assert.True(t, p.Tiers[0].Allowed)
	assert.Equal(t, 4, p.Tiers[0].Candidates)
	assert.Equal(t, int64(4), p.Tiers[0].BestRoom, "an empty leaf: 4 nodes × 8 GPUs = 4 pods of 8")
	assert.Equal(t, "32", p.Tiers[0].BestFree.Resources["nvidia.com/gpu"])
	assert.Equal(t, "nvidia.com/gpu", p.Tiers[0].Binding)
	assert.Equal(t, gangcontract.BindingTierLimit, p.Tiers[1].Binding)
	assert.Equal(t, int64(8), p.Tiers[1].BestRoom, "an empty spine")
	assert.Equal(t, []gangcontract.Suggestion{{Kind: gangcontract.SuggestFewerPods, Value: 4, Domain: p.Tiers[0].Best},
		{Kind: gangcontract.SuggestHigherTier, Value: 2, Domain: p.Tiers[1].Best}}, p.Suggestions)
	assert.Contains(t, r.Changes, "fewer pods: "+p.Tiers[0].Best+" has room for 4 of the 5 pods still to place (minMember 4 instead of 5)")
	assert.Contains(t, r.Changes, "a higher tier: with highestTierAllowed 2, "+p.Tiers[1].Best+" has room for all 5 pods")
	for _, f := range []output.Format{output.Table, output.JSON} {
		clitest.Render(t, "why-tier", f, r)
	}
}

// A gang behind a full Queue (recorded): the status controller's numbers, the holder and its deadline.
func TestBehindAFullQueue(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, _, err := why.Resolve(s, "ml", "cap-b")
	require.NoError(t, err)
	r := why.Build(s, pg, "", now(t))
	assert.True(t, r.Waits())
	assert.Equal(t, "Pending", r.Phase)
	require.NotNil(t, r.Waiting)
	assert.Equal(t, "QueueCapabilityExceeded", r.Waiting.Reason)
	assert.Equal(t, map[string]string{"nvidia.com/gpu": "16"}, r.Queue.Capability)
	assert.Equal(t, map[string]string{"nvidia.com/gpu": "16"}, r.Queue.Reserved)
	require.Len(t, r.Queue.Holders, 1)
	h := r.Queue.Holders[0]
	assert.Equal(t, "ml/cap-a", h.Gang)
	assert.NotEmpty(t, h.EndsBy, "cap-a's pods have activeDeadlineSeconds 3600")
	assert.Nil(t, r.Placement, "not enqueued: the scheduler never tried it")
	clitest.Render(t, "why-queue", output.Table, r)
}

// A placed gang: nothing to change, exit 0.
func TestPlaced(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, _, err := why.Resolve(s, "default", "pod/placed-0")
	require.NoError(t, err)
	r := why.Build(s, pg, "", now(t))
	assert.False(t, r.Waits())
	assert.Equal(t, 2, r.Placed)
	assert.Equal(t, "leaf-0", r.Domain)
	assert.Empty(t, r.Changes)
	clitest.Render(t, "why-placed", output.Table, r)
}

func TestResolveErrors(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	_, _, err := why.Resolve(s, "default", "nope")
	assert.Equal(t, exitcode.NotFound, exitcode.Of(err))
	_, _, err = why.Resolve(s, "default", "pod/pinned")
	assert.ErrorContains(t, err, "names PodGroup pinned, which does not exist")
	_, _, err = why.Resolve(s, "default", "deployment/x")
	assert.Equal(t, exitcode.Usage, exitcode.Of(err))
}

// Every kind whose registry row says `why` resolves it is resolved: a name that does not exist is
// NotFound, never a usage error.
func TestResolveEveryWhyKind(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	for _, w := range workload.All() {
		if !w.CLI.Why {
			continue
		}
		_, _, err := why.Resolve(s, "default", w.CLI.Name+"/no-such-object")
		assert.Equal(t, exitcode.NotFound, exitcode.Of(err), "%s: %v", w.Kind, err)
	}
}

// GPUs only in limits (issue 38 item 1): Volcano's job controller leaves them out of minResources,
// Kubernetes requests them at their limit, and why reserves and needs them as the status controller
// prices them (gangcontract.Price): the Running gang holds 16 GPUs of a 16-GPU Queue, and the waiting
// one needs 16 more, though neither PodGroup's minResources names a GPU.
func TestGPUsInLimitsArePriced(t *testing.T) {
	gangJob := func(name, uid, phase string) string {
		return `
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: ` + name + `, namespace: ml, uid: ` + uid + `}
spec:
  minAvailable: 2
  queue: capped
  tasks:
  - name: worker
    replicas: 2
    template:
      spec:
        containers:
        - name: w
          image: worker
          resources:
            requests: {cpu: "1"}
            limits: {cpu: "1", nvidia.com/gpu: "8"}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: ` + name + `-` + uid + `
  namespace: ml
  creationTimestamp: "2026-11-24T22:00:0` + uid[len(uid)-1:] + `Z"
  ownerReferences:
  - {apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: ` + name + `, uid: ` + uid + `, controller: true}
spec:
  minMember: 2
  queue: capped
  minResources: {cpu: "2", count/pods: "2"}
status: {phase: ` + phase + `}
`
	}
	s, err := snapshot.Decode([]byte(`
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: capped}
spec:
  capability: {nvidia.com/gpu: "16"}
status: {state: Open}
---` + gangJob("first", "uid-1", "Running") + "---" + gangJob("second", "uid-2", "Pending")))
	require.NoError(t, err)
	pg, owner, err := why.Resolve(s, "ml", "vcjob/second")
	require.NoError(t, err)
	r := why.Build(s, pg, owner, now(t))
	assert.Equal(t, map[string]string{"nvidia.com/gpu": "16"}, r.Queue.Reserved, "the Running gang's GPUs, requested at their limit")
	require.Len(t, r.Queue.Holders, 1)
	assert.Equal(t, "16", r.Queue.Holders[0].Reserves["nvidia.com/gpu"])
	assert.NotContains(t, r.Queue.Holders[0].MinResources, "nvidia.com/gpu", "the stated minResources, as Volcano wrote it")
	assert.Equal(t, "16", r.Queue.Needs["nvidia.com/gpu"])
	var b strings.Builder
	require.NoError(t, r.WriteTable(&b))
	assert.Contains(t, b.String(), "Inqueue and Running gangs reserve 16 nvidia.com/gpu; this gang needs 2 count/pods, 2 cpu, 16 nvidia.com/gpu.")
}
