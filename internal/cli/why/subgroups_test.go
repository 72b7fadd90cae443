package why_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/why"
	"github.com/hyperbatch/hyperbatch/internal/gangcontract"
)

// A gang with sub-groups that fit nowhere whole: why says which sub-groups fit where (per gang domain
// how many it holds, and the rooms of the HyperNodes their limit allows) and what would fit (fewer
// sub-groups, or the room one more needs). The numbers are the annotation hyperbatch-scheduler writes
// (domain.ChooseGroups, TestChooseGroupsPlacementNumbers; TestSubGroupsOnFragmentedFabric reads it
// from a real PodGroup), put on the recorded gang.
func TestSubGroupsFitWhere(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	pg.Spec.MinMember = 6
	p := &gangcontract.Placement{Version: gangcontract.PlacementVersion, Time: "2026-11-24T22:15:00Z", Limit: "highestTierAllowed=2",
		Need: gangcontract.Amounts{Pods: 6, Resources: map[string]string{"cpu": "24", "nvidia.com/gpu": "48"}},
		Tiers: []gangcontract.TierPlacement{
			{Tier: 1, Allowed: true, Candidates: 4, Best: "leaf-1", BestRoom: 4, Nodes: 4, EligibleNodes: 4, Binding: "nvidia.com/gpu",
				BestFree: gangcontract.Amounts{Pods: 440, Resources: map[string]string{"cpu": "128", "nvidia.com/gpu": "32"}}},
			{Tier: 2, Allowed: true, Candidates: 2, Evaluated: 1, Best: "spine-1", BestRoom: 6, Nodes: 8, EligibleNodes: 8, Binding: gangcontract.BindingSubGroups,
				BestFree: gangcontract.Amounts{Pods: 880, Resources: map[string]string{"cpu": "256", "nvidia.com/gpu": "48"}}},
		},
		Message: "gang default/too-big (highestTierAllowed=2) waits: 6 more pods needing 24 cpu, 48 nvidia.com/gpu in 2 required sub-group(s): ...",
		SubGroups: &gangcontract.SubGroupPlacement{Required: 2, Size: 3, Limit: "highestTierAllowed=1", Holds: 1, Domains: []gangcontract.SubGroupDomain{
			{HyperNode: "spine-1", Tier: 2, Holds: 1, Rooms: []gangcontract.NamedRoom{{Name: "leaf-2", Room: 4}, {Name: "leaf-3", Room: 2}}}}},
	}
	v, err := p.Encode()
	require.NoError(t, err)
	pg.Annotations[gangcontract.PlacementAnnotation] = v
	r := why.Build(s, pg, owner, now(t))
	require.True(t, r.Waits())
	assert.Contains(t, r.Changes, "fewer sub-groups: spine-1 holds 1 of the 2 required sub-groups of 3 pods whole (minSubGroups at most 1, and minMember 3 instead of 6)")
	assert.Contains(t, r.Changes, "more room: 1 more pod free in leaf-3 (highestTierAllowed=1) would hold one more sub-group of 3 pods inside spine-1")
	var b strings.Builder
	require.NoError(t, output.Print(&b, output.Table, r))
	assert.Contains(t, b.String(), "Sub-groups: 2 required, 3 pods each, each inside one HyperNode of highestTierAllowed=1; the most one allowed domain holds whole: 1.")
	clitest.Render(t, "why-subgroups", output.Table, r)
}

// A gang with sub-groups for which hyperbatch-scheduler preempts: why says what it evicts (its
// GangPreempting Event on the PodGroup, the latest of its preemption Events) and that the victims
// were chosen in the gang's sub-group shape; an Event older than the PodGroup is a former gang's.
func TestSubGroupsPreempting(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	pg, owner, err := why.Resolve(s, "default", "vcjob/too-big")
	require.NoError(t, err)
	pg.Spec.SubGroupPolicy = []schedulingv1beta1.SubGroupPolicySpec{{Name: "tp", SubGroupSize: ptr.To[int32](3), MatchLabelKeys: []string{"part"}}}
	born := pg.CreationTimestamp.Time
	event := func(name, reason, msg string, at time.Time) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "PodGroup", Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID},
			Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, LastTimestamp: metav1.NewTime(at)}
	}
	s.Events = append(s.Events,
		event("old", gangcontract.ReasonGangPreempting, "preempting 9 pod(s) of 3 victim(s) to clear HyperNode spine-0 (tier 2): default/a, default/b, default/c", born.Add(-time.Hour)),
		event("cannot", gangcontract.ReasonGangWaiting, "gang default/too-big (priority 1000) cannot preempt: no running pod has a priority below 1000", born.Add(time.Minute)),
		event("now", gangcontract.ReasonGangPreempting, "preempting 6 pod(s) of 2 victim(s) to clear HyperNode spine-1 (tier 2): default/small-a, default/small-b", born.Add(2*time.Minute)))
	r := why.Build(s, pg, owner, now(t))
	require.True(t, r.Waits())
	require.NotNil(t, r.Preemption)
	assert.True(t, r.Preemption.Evicting)
	assert.True(t, r.Preemption.SubGroups)
	assert.Contains(t, r.Preemption.Message, "to clear HyperNode spine-1 (tier 2): default/small-a, default/small-b")
	assert.Contains(t, r.Changes, "wait: hyperbatch-scheduler is preempting for it (victims chosen so that its required sub-groups fit whole, each in one HyperNode their networkTopology allows): "+
		"preempting 6 pod(s) of 2 victim(s) to clear HyperNode spine-1 (tier 2): default/small-a, default/small-b")
	clitest.Render(t, "why-subgroups-preempting", output.Table, r)

	// Only the Event saying it cannot preempt: said, not counted as a wait.
	s.Events = s.Events[:len(s.Events)-1]
	r = why.Build(s, pg, owner, now(t))
	require.NotNil(t, r.Preemption)
	assert.False(t, r.Preemption.Evicting)
	assert.Contains(t, r.Preemption.Message, "cannot preempt")
	for _, c := range r.Changes {
		assert.NotContains(t, c, "preempting for it")
	}
}
