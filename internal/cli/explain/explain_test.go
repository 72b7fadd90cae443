package explain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/internal/cli/clitest"
	"github.com/hyperbatch/hyperbatch/internal/cli/explain"
	"github.com/hyperbatch/hyperbatch/internal/cli/output"
	"github.com/hyperbatch/hyperbatch/internal/cli/snapshot"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/workload"
)

// find returns the recorded object of kind k named namespace/name.
func find(t *testing.T, s *snapshot.Snapshot, k defaults.Kind, namespace, name string) (defaults.KindSpec, defaults.Object) {
	t.Helper()
	spec, ok := defaults.LookupKind(k)
	require.True(t, ok)
	var objs []client.Object
	switch k {
	case defaults.KindPod:
		for i := range s.Pods {
			objs = append(objs, &s.Pods[i])
		}
	case defaults.KindVolcanoJob:
		for i := range s.VolcanoJobs {
			objs = append(objs, &s.VolcanoJobs[i])
		}
	case defaults.KindPodGroup:
		for i := range s.PodGroups {
			objs = append(objs, &s.PodGroups[i])
		}
	case defaults.KindHyperJob:
		for i := range s.HyperJobs {
			objs = append(objs, &s.HyperJobs[i])
		}
	}
	for _, o := range objs {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return spec, o
		}
	}
	t.Fatalf("no recorded %s %s/%s", k, namespace, name)
	return spec, nil
}

func TestHyperJobSplit(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	spec, obj := find(t, s, defaults.KindHyperJob, "ml", "split")
	r := explain.Build(spec, obj, s)
	assert.Equal(t, "ml-a", r.Policy)
	require.Len(t, r.Candidates, 3)
	assert.Equal(t, []string{"ml-a", "ml-b", "everyone"}, []string{r.Candidates[0].Name, r.Candidates[1].Name, r.Candidates[2].Name})
	assert.Equal(t, "governs", r.Candidates[0].Outcome)
	assert.Contains(t, r.Candidates[1].Outcome, "tie lost: same weight 5 as ml-a")
	assert.Contains(t, r.Candidates[2].Outcome, "outranked: weight 0 < 5 of ml-a")
	assert.Equal(t, []explain.Filled{
		{Field: "queue", Source: "ml-a", From: "WorkloadPolicy ml-a"},
		{Field: "schedulerName", Source: "ml-a", From: "WorkloadPolicy ml-a"},
		{Field: "networkTopology", Source: "ml-a", From: "WorkloadPolicy ml-a"},
	}, r.Filled)
	require.Len(t, r.Split, 2)
	for i, c := range r.Split {
		// 2 pods of 1 cpu and 4 GPUs each, in the queue ml-a gave the template, for both clusters.
		assert.Equal(t, explain.Child{Name: []string{"split-trainer-0", "split-trainer-1"}[i], ReplicatedJob: "trainer", Pods: 2, MinAvailable: 2,
			CPU: "2", GPU: 8, Queue: "capped", Clusters: []string{"member-a", "member-b"}, State: c.State}, c)
	}
	for _, f := range []output.Format{output.Table, output.JSON} {
		clitest.Render(t, "explain-hyperjob", f, r)
	}
}

// A pod pinned to a node in a namespace whose policy bounds the tier: the engine skips the bound.
func TestPinnedPodSkip(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	spec, obj := find(t, s, defaults.KindPod, "default", "pinned")
	r := explain.Build(spec, obj, s)
	require.Len(t, r.Skipped, 1)
	assert.Equal(t, explain.Skipped{Path: "metadata.annotations[volcano.sh/network-topology-mode]", Default: "networkTopology hard, highestTierAllowed 2",
		From: "WorkloadPolicy team-a", Conflict: `spec.nodeName "kwok-node-15"`}, r.Skipped[0])
	assert.Empty(t, r.WouldFill)
	clitest.Render(t, "explain-pinned-pod", output.Table, r)
}

// A gang refused by its Queue: the manager's Warning Event with its numbers.
func TestRefusedPodGroup(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	spec, obj := find(t, s, defaults.KindPodGroup, "ml", "cap-b")
	r := explain.Build(spec, obj, s)
	require.NotEmpty(t, r.Warnings)
	assert.Equal(t, "QueueCapabilityExceeded", r.Warnings[0].Reason)
	assert.Contains(t, r.Warnings[0].Message, "Inqueue and Running gangs reserve 16, this gang's minResources 8, total 24 > capability 16")
	clitest.Render(t, "explain-podgroup", output.Table, r)
}

// A policy created after the object: the engine would fill its fields now, an update never does.
func TestWouldFillAfterPolicyChange(t *testing.T) {
	s := clitest.Recorded(t, "localcluster.yaml")
	for i := range s.Policies {
		if s.Policies[i].Name == "team-a" {
			s.Policies[i].Spec.Defaults.PriorityClassName = "batch-high"
		}
	}
	spec, obj := find(t, s, defaults.KindVolcanoJob, "default", "too-big")
	r := explain.Build(spec, obj, s)
	require.Len(t, r.WouldFill, 1)
	assert.Equal(t, explain.Filled{Field: "priorityClassName", Path: "spec.priorityClassName", Source: "team-a", From: "WorkloadPolicy team-a"}, r.WouldFill[0])
}

func TestLookupKind(t *testing.T) {
	for in, want := range map[string]defaults.Kind{"pod": defaults.KindPod, "pods": defaults.KindPod, "vcjob": defaults.KindVolcanoJob,
		"jobs.batch.volcano.sh": defaults.KindVolcanoJob, "VolcanoJob": defaults.KindVolcanoJob, "pg": defaults.KindPodGroup,
		"podgroups": defaults.KindPodGroup, "jobset": defaults.KindJobSet, "HyperJob": defaults.KindHyperJob, "pp": defaults.KindPropagationPolicy,
		"propagationpolicy": defaults.KindPropagationPolicy} {
		k, err := explain.LookupKind(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, k.Kind, in)
		}
	}
	for _, w := range workload.All() {
		k, err := explain.LookupKind(w.CLI.Name)
		if w.CLI.Explain && assert.NoError(t, err, w.Kind) {
			assert.Equal(t, w.Kind, k.Kind)
		}
	}
	_, err := explain.LookupKind("job")
	assert.ErrorContains(t, err, "a Volcano Job is vcjob")
	_, err = explain.LookupKind("workloadpolicy")
	assert.ErrorContains(t, err, "not one hyperbatch explains")
}
