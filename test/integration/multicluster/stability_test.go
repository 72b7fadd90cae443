package multicluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// stabilityWindow is how long nothing may change once a HyperJob's children run.
const stabilityWindow = 2 * time.Minute

// versions are the resourceVersions of the objects that must not change: the plane's
// PropagationPolicies and child Jobs, and the member's child Jobs, of one namespace.
func versions(ctx context.Context, ns string, membersOf ...string) (map[string]string, error) {
	out := map[string]string{}
	var pps policyv1alpha1.PropagationPolicyList
	if err := plane.Client.List(ctx, &pps, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, p := range pps.Items {
		out["plane/PropagationPolicy/"+p.Name] = p.ResourceVersion
	}
	var jobs batchv1alpha1.JobList
	if err := plane.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, j := range jobs.Items {
		out["plane/Job/"+j.Name] = j.ResourceVersion
	}
	for _, m := range membersOf {
		var mj batchv1alpha1.JobList
		if err := members[m].Client.List(ctx, &mj, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for _, j := range mj.Items {
			out[m+"/Job/"+j.Name] = j.ResourceVersion
		}
	}
	return out, nil
}

func changed(before, now map[string]string) []string {
	var out []string
	for k, v := range before {
		if now[k] != v {
			out = append(out, fmt.Sprintf("%s %s→%s", k, v, now[k]))
		}
	}
	for k := range now {
		if _, ok := before[k]; !ok {
			out = append(out, k+" appeared")
		}
	}
	sort.Strings(out)
	return out
}

// TestNoFightForTwoMinutes: once a HyperJob's children run in their member (positive signal: both
// children Running there, their state reflected by Karmada into the plane's children and counted in
// the HyperJob's status), for two minutes no resourceVersion of a PropagationPolicy, a control-plane
// child or a member child changes: neither the HyperJob controller nor Karmada rewrites what the
// other wrote. During the window the test annotates the HyperJob every 30 s and waits until the
// HyperJob controller has reconciled again each time, so the controller is shown to run, not idle.
// It runs in parallel with the other long test of the package (member loss), on member1 only.
func TestNoFightForTwoMinutes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), stabilityWindow+4*time.Minute)
	defer cancel()
	const ns, name = "stable", "hs"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns)

	// Two children of 2 pods × 1 GPU in member1 that kwok keeps Running.
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(leafReplicatedJob("a", 2, 2, 1, kwokHold, "member1")).Obj()
	require.NoError(t, plane.Client.Create(ctx, hj))
	children := map[string]string{"hs-a-0": "member1", "hs-a-1": "member1"}

	waitFor(ctx, t, "both children Running in member1, reflected on the plane and counted in the HyperJob", func(ctx context.Context) (bool, string) {
		var state []string
		for child, m := range children {
			var mj, pj batchv1alpha1.Job
			if err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &mj); err != nil {
				return false, err.Error()
			}
			if err := plane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &pj); err != nil {
				return false, err.Error()
			}
			state = append(state, fmt.Sprintf("%s: member %s/%d running, plane %s/%d running", child, mj.Status.State.Phase, mj.Status.Running, pj.Status.State.Phase, pj.Status.Running))
			if mj.Status.State.Phase != batchv1alpha1.Running || mj.Status.Running != 2 || pj.Status.State.Phase != batchv1alpha1.Running || pj.Status.Running != 2 {
				return false, strings.Join(state, "; ")
			}
		}
		var got trainingv1alpha1.HyperJob
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &got); err != nil {
			return false, err.Error()
		}
		var running int32
		for _, s := range got.Status.ReplicatedJobsStatus {
			running += s.Running
		}
		state = append(state, fmt.Sprintf("HyperJob running %d", running))
		return running == 4, strings.Join(state, "; ")
	})
	before, err := versions(ctx, ns, "member1")
	require.NoError(t, err)
	require.Len(t, before, 6, "2 PropagationPolicies, 2 plane children, 2 member children: %v", before)
	start := time.Now()
	t.Logf("children Running; watching %d resourceVersions for %s", len(before), stabilityWindow)

	pokes := 0
	for time.Since(start) < stabilityWindow {
		// The controller runs: annotate the HyperJob and wait for another successful pass.
		passes := reconciles(t)
		pokes++
		var cur trainingv1alpha1.HyperJob
		require.NoError(t, plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur))
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test.hyperbatch.dev/poke"] = fmt.Sprint(pokes)
		require.NoError(t, plane.Client.Patch(ctx, &cur, patch))
		waitFor(ctx, t, "another successful pass of the HyperJob controller", func(context.Context) (bool, string) {
			n := reconciles(t)
			return n > passes, fmt.Sprintf("%v passes (before the poke %v)", n, passes)
		})
		now, err := versions(ctx, ns, "member1")
		require.NoError(t, err)
		require.Empty(t, changed(before, now), "%s after the children ran: objects rewritten", time.Since(start).Round(time.Second))
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(min(30*time.Second, stabilityWindow-time.Since(start)+time.Second)):
		}
	}
	now, err := versions(ctx, ns, "member1")
	require.NoError(t, err)
	require.Empty(t, changed(before, now), "objects rewritten within %s", stabilityWindow)
	t.Logf("no resourceVersion of %d objects changed in %s (%d pokes, each followed by a controller pass)", len(before), time.Since(start).Round(time.Second), pokes)
	// And no Event says otherwise (issue 38: "updated 2 PropagationPolicies in place" ten times for
	// applies that changed nothing): the one update in place is the dispatch (the suspension
	// lifted), reported once.
	evs, err := hyperJobEvents(ctx, ns, name, hyperjob.ReasonSyncedChildren)
	require.NoError(t, err)
	inPlace := 0
	for _, e := range evs {
		if strings.Contains(e.Message, "in place") {
			inPlace += int(e.Count)
			t.Logf("%s (%d times)", e.Message, e.Count)
		}
	}
	require.Equal(t, 1, inPlace, "only the dispatch updates the PropagationPolicies in place: %s", describe(evs))

	deleteAndWaitGone(ctx, t, hj, children)
}
