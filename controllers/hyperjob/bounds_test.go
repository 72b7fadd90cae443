package hyperjob

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/naming"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// etcdObjectLimit is etcd's default request size limit (--max-request-bytes), the largest object
// the apiserver can store.
const etcdObjectLimit = 1536 * 1024

// statusBytesPerChild measures the JSON bytes one child adds to a HyperJob's status, as stored: a
// Completed jobStates entry with Volcano's reason and message and a timestamp, for a HyperJob and
// replicatedJob whose names are nameLen characters long in total with the index.
func statusBytes(t *testing.T, hjName, rjName string, n int) int {
	t.Helper()
	hj := hyperJob(builders.MakeReplicatedJob(rjName, int32(n)).Obj())
	hj.Name = hjName
	p, err := BuildPlan(hj, defaults.Namespace{Name: "ns"}, nil)
	require.NoError(t, err)
	require.Nil(t, p.Refusal)
	jobs := map[string]*batchv1alpha1.Job{}
	ts := metav1.NewTime(time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC))
	for _, c := range p.children {
		jobs[c.name] = &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: c.name}, Status: batchv1alpha1.JobStatus{
			State:     batchv1alpha1.JobState{Phase: batchv1alpha1.Completed, Reason: "", Message: "", LastTransitionTime: ts},
			Succeeded: 9}}
	}
	st, _ := ComputeStatus(hj, p, jobs)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	return len(b)
}

// TestStatusSizeAtMaxChildren pins the figures naming.MaxChildren is chosen from: the bytes each
// child adds to the status, with a typical and with the longest possible child name, and that the
// status of a HyperJob at the limit stays well under etcd's object limit.
func TestStatusSizeAtMaxChildren(t *testing.T) {
	perChild := func(hjName, rjName string) float64 {
		small, large := statusBytes(t, hjName, rjName, 1000), statusBytes(t, hjName, rjName, 2000)
		return float64(large-small) / 1000
	}
	typical := perChild("llm-pretrain", "worker")
	// Names as long as the 63-character rule allows with four-digit indexes.
	longest := perChild(strings.Repeat("h", 29), strings.Repeat("r", 28))
	t.Logf("status bytes per child: typical %.0f, longest names %.0f", typical, longest)
	assert.InDelta(t, 93, typical, 15, "typical bytes per child moved; update naming.MaxChildren's doc and docs/hyperjob.md")
	assert.InDelta(t, 132, longest, 15, "bytes per child with the longest names moved; update naming.MaxChildren's doc and docs/hyperjob.md")

	atLimit := statusBytes(t, strings.Repeat("h", 29), strings.Repeat("r", 28), naming.MaxChildren)
	t.Logf("status at the limit (%d children, longest names): %d bytes", naming.MaxChildren, atLimit)
	assert.Less(t, atLimit, etcdObjectLimit/2, "the status at MaxChildren must leave half of etcd's limit for the spec and messages")
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBuildPlanRefusesTooManyChildrenWithoutAllocating: a HyperJob asking for 3 × 100,000 children
// (or split into more) is refused with SpecInvalid/TooManyChildren naming the field, the total and the
// limit, and BuildPlan allocates no more for it than for a one-child HyperJob: nothing is built per
// requested child before the count is checked.
func TestBuildPlanRefusesTooManyChildrenWithoutAllocating(t *testing.T) {
	huge := hyperJob(
		builders.MakeReplicatedJob("a", 100000).Obj(),
		builders.MakeReplicatedJob("b", 100000).Obj(),
		builders.MakeReplicatedJob("c", 100000).Obj())
	p, err := BuildPlan(huge, defaults.Namespace{Name: "ns"}, nil)
	require.NoError(t, err)
	require.NotNil(t, p.Refusal)
	assert.Equal(t, ConditionSpecInvalid, p.Refusal.Condition)
	assert.Equal(t, ReasonTooManyChildren, p.Refusal.Reason)
	assert.Contains(t, p.Refusal.Message, `replicatedJob "a" brings the total to 100000`)
	assert.Contains(t, p.Refusal.Message, "spec.replicatedJobs")
	assert.Contains(t, p.Refusal.Message, fmt.Sprintf("limit of %d", naming.MaxChildren))
	assert.Zero(t, p.SplitCount())

	// Two replicatedJobs each under the limit, together over it.
	over := hyperJob(builders.MakeReplicatedJob("a", naming.MaxChildren/2+1).Obj(), builders.MakeReplicatedJob("b", naming.MaxChildren/2).Obj())
	p, err = BuildPlan(over, defaults.Namespace{Name: "ns"}, nil)
	require.NoError(t, err)
	require.NotNil(t, p.Refusal)
	assert.Contains(t, p.Refusal.Message, fmt.Sprintf("total to %d", naming.MaxChildren+1))

	// A split that multiplies a small replicas count over the limit.
	split := hyperJob(*staticRJ(1, task("w", 4, "1")))
	split.Spec.ReplicatedJobs[0].Replicas = naming.MaxChildren/4 + 1
	p, err = BuildPlan(split, defaults.Namespace{Name: "ns"}, nil)
	require.NoError(t, err)
	require.NotNil(t, p.Refusal)
	assert.Equal(t, ReasonTooManyChildren, p.Refusal.Reason)

	// At the limit: planned.
	atLimit := hyperJob(builders.MakeReplicatedJob("a", naming.MaxChildren).Obj())
	p, err = BuildPlan(atLimit, defaults.Namespace{Name: "ns"}, nil)
	require.NoError(t, err)
	require.Nil(t, p.Refusal)
	assert.EqualValues(t, naming.MaxChildren, p.SplitCount())

	one := hyperJob(builders.MakeReplicatedJob("a", 1).Obj())
	small := allocated(func() { _, _ = BuildPlan(one, defaults.Namespace{Name: "ns"}, nil) })
	refused := allocated(func() { _, _ = BuildPlan(huge, defaults.Namespace{Name: "ns"}, nil) })
	t.Logf("BuildPlan allocates %d bytes for 1 child, %d bytes for a refused 300,000", small, refused)
	assert.Less(t, refused, 3*small+64<<10, "a refused HyperJob must cost about what a one-child plan costs")
}

// BenchmarkBuildPlan reports the plan's memory per HyperJob: at the limit (the most the manager ever
// builds for one HyperJob), and for a refused 3 × 100,000.
func BenchmarkBuildPlan(b *testing.B) {
	for _, tc := range []struct {
		name string
		hj   *trainingv1alpha1.HyperJob
	}{
		{"children=1", hyperJob(builders.MakeReplicatedJob("a", 1).Obj())},
		{fmt.Sprintf("children=%d", naming.MaxChildren), hyperJob(builders.MakeReplicatedJob("a", naming.MaxChildren).Obj())},
		{"refused=300000", hyperJob(builders.MakeReplicatedJob("a", 100000).Obj(), builders.MakeReplicatedJob("b", 100000).Obj(),
			builders.MakeReplicatedJob("c", 100000).Obj())},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := BuildPlan(tc.hj, defaults.Namespace{Name: "ns"}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBuildPlanTenancy: the queue a child gets (its template's, else the defaults') and its clusters
// are checked against the namespace's WorkloadPolicy, also where the webhooks do not run; the plan
// stays complete (existing children are kept and counted) but Tenancy forbids creating any.
func TestBuildPlanTenancy(t *testing.T) {
	pols, err := defaults.NewPolicies([]hbv1.WorkloadPolicy{*builders.TeamA().AllowedClusters("a", "b").Obj()})
	require.NoError(t, err)
	nsA := defaults.Namespace{Name: "ns", Labels: map[string]string{"team": "a"}}
	rj := func(queue string, clusters ...string) trainingv1alpha1.ReplicatedJob {
		r := builders.MakeReplicatedJob("w", 2).Clusters(clusters...).Obj()
		r.TemplateSpec.Queue = queue
		return r
	}
	for _, tc := range []struct {
		name, reason, msg string
		rj                trainingv1alpha1.ReplicatedJob
	}{
		{"allowed", "", "", rj("shared", "a")},
		{"defaulted queue and clusters", "", "", rj("default")},
		{"queue", ReasonQueueNotAllowed, `replicatedJob "w" (spec.replicatedJobs[].templateSpec.queue): queue "gpu" is not allowed in namespace "ns": WorkloadPolicy "team-a" allows only "team-a", "shared"`, rj("gpu", "a")},
		{"cluster", ReasonClusterNotAllowed, `replicatedJob "w" (spec.replicatedJobs[].clusterNames): cluster "c" is not allowed`, rj("shared", "a", "c")},
	} {
		p, err := BuildPlan(hyperJob(tc.rj), nsA, pols)
		require.NoError(t, err, tc.name)
		require.Nil(t, p.Refusal, tc.name)
		assert.EqualValues(t, 2, p.SplitCount(), tc.name)
		if tc.reason == "" {
			assert.Nil(t, p.Tenancy, tc.name)
			continue
		}
		require.NotNil(t, p.Tenancy, tc.name)
		assert.Equal(t, tc.reason, p.Tenancy.Reason, tc.name)
		assert.Contains(t, p.Tenancy.Message, tc.msg, tc.name)
		st, newly := ComputeStatus(hyperJob(tc.rj), p, nil)
		require.NotNil(t, newly, tc.name)
		assert.Equal(t, ConditionSpecInvalid, newly.Type)
		assert.Len(t, st.ReplicatedJobsStatus, 1)
	}
}
