package hyperjob

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// bigName is the HyperJob of the 1,000-child test.
const bigName = "big"

// childMeta lists the metadata only of bigName's children (cheap enough to poll with 2,000 objects).
func childMeta(ctx context.Context, ns string) (jobs, pps map[string]*metav1.PartialObjectMetadata, err error) {
	list := func(gvk string) (map[string]*metav1.PartialObjectMetadata, error) {
		l := &metav1.PartialObjectMetadataList{}
		switch gvk {
		case "job":
			l.SetGroupVersionKind(batchv1alpha1.SchemeGroupVersion.WithKind("JobList"))
		default:
			l.SetGroupVersionKind(policyv1alpha1.SchemeGroupVersion.WithKind("PropagationPolicyList"))
		}
		if err := env.Client.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{hbv1.HyperJobNameLabel: bigName}); err != nil {
			return nil, err
		}
		out := make(map[string]*metav1.PartialObjectMetadata, len(l.Items))
		for i := range l.Items {
			out[l.Items[i].Name] = &l.Items[i]
		}
		return out, nil
	}
	if jobs, err = list("job"); err != nil {
		return nil, nil, err
	}
	pps, err = list("pp")
	return jobs, pps, err
}

// bigSplit is one replicatedJob whose template (1,000 workers × 8 GPUs) splits into 1,000 children of
// 8 GPUs each.
func bigSplit(ns, name string) *trainingv1alpha1.HyperJob {
	return builders.MakeHyperJob(ns, name).ReplicatedJobs(trainingv1alpha1.ReplicatedJob{Name: "w", Replicas: 1,
		SplitPolicy: &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeStatic, Accelerators: ptr.To(8), AcceleratorType: ptr.To(gpu)},
		TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
			{Name: "worker", Replicas: 1000, Template: builders.PodTemplate("trainer:1", 8)}}}}).Obj()
}

// A manager stopped in the middle of creating a 1,000-child split, and a new one started: the split
// converges to exactly the 1,000 children — no duplicate, no orphan, every child controlled by the
// HyperJob with the right template hash — and deleting the HyperJob lets the garbage collector
// remove all 2,000 objects.
func TestRestartMidSplitConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000-child split")
	}
	ctx := context.Background()
	ns := newNamespace(t, "hj-restart", nil)
	create(t, bigSplit(ns, "big"))
	want := names("big", "w", 1000)

	// Two interruptions: the first manager is stopped while it applies PropagationPolicies (which
	// come first), the second while it creates Volcano Jobs; a third finishes.
	interrupt := func(what string, enough func(jobs, pps int) bool) {
		t.Helper()
		// The interrupted managers write at a bounded rate (about 5 s per 1,000 children), so the
		// test's polling reliably stops them mid-split even on a fast, idle machine.
		cfg := testConfig()
		cfg.QPS, cfg.Burst = 200, 200
		stop := startManager(t, cfg, ns)
		waitFor(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
			jobs, pps, err := childMeta(ctx, ns)
			return err == nil && enough(len(jobs), len(pps)), err
		})
		stop()
		jobs, pps, err := childMeta(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("manager stopped %s with %d Volcano Jobs and %d PropagationPolicies of 1000 each", what, len(jobs), len(pps))
		if len(jobs) == 1000 && len(pps) == 1000 {
			t.Fatalf("the manager finished before it was stopped; the test did not restart mid-split")
		}
	}
	interrupt("while applying PropagationPolicies", func(jobs, pps int) bool { return pps >= 200 })
	interrupt("while creating Volcano Jobs", func(jobs, pps int) bool { return jobs >= 200 })

	start := time.Now()
	startManager(t, testConfig(), ns)
	var jobs, pps map[string]*metav1.PartialObjectMetadata
	waitFor(t, 3*time.Minute, "1,000 children after the restart", func(ctx context.Context) (bool, error) {
		var err error
		jobs, pps, err = childMeta(ctx, ns)
		return err == nil && len(jobs) == 1000 && len(pps) == 1000, err
	})
	t.Logf("last manager converged in %s", time.Since(start).Round(time.Millisecond))
	cur, _ := getHyperJob(ctx, ns, "big")
	s, ref := hyperjob.SplitReplicatedJob(&cur.Spec.ReplicatedJobs[0])
	if ref != nil {
		t.Fatal(ref)
	}
	wantHash, _ := hyperjob.Hash(&s.Template)
	if got := keys(jobs); !slices.Equal(got, sortedCopy(want)) {
		t.Fatalf("job names %s", short(got))
	}
	if got := keys(pps); !slices.Equal(got, sortedCopy(want)) {
		t.Fatalf("PropagationPolicy names %s", short(got))
	}
	for n, j := range jobs {
		if !metav1.IsControlledBy(j, cur) || j.DeletionTimestamp != nil || j.Labels[hbv1.VCJobTemplateSpecHashLabel] != wantHash {
			t.Fatalf("job %s: owners %+v labels %v", n, j.OwnerReferences, j.Labels)
		}
		if !metav1.IsControlledBy(pps[n], cur) {
			t.Fatalf("PropagationPolicy %s: owners %+v", n, pps[n].OwnerReferences)
		}
	}
	waitFor(t, time.Minute, "status of 1,000 children", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "big")
		return err == nil && hj.Status.SplitCount != nil && *hj.Status.SplitCount == 1000 &&
			len(hj.Status.ReplicatedJobsStatus) == 1 && len(hj.Status.ReplicatedJobsStatus[0].JobStates) == 1000, err
	})
	// Nothing else appears later (e.g. from a late write of a stopped manager), even after a whole
	// reconcile of the running one.
	waitForFullReconcile(t, ns, "big", 1000)
	var all batchv1alpha1.JobList
	if err := env.Client.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var allPP policyv1alpha1.PropagationPolicyList
	if err := env.Client.List(ctx, &allPP, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 1000 || len(allPP.Items) != 1000 {
		t.Fatalf("namespace holds %d Volcano Jobs and %d PropagationPolicies, want 1000 each", len(all.Items), len(allPP.Items))
	}

	if err := env.Client.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the garbage collector to delete 2,000 children", func(ctx context.Context) (bool, error) {
		jobs, pps, err := childMeta(ctx, ns)
		if err == nil && len(jobs)+len(pps) > 0 {
			err = fmt.Errorf("%d jobs and %d policies left", len(jobs), len(pps))
		}
		return err == nil, err
	})
}

// Deleting a HyperJob deletes every child through the garbage collector (kube-controller-manager),
// not through the controller: there is no finalizer.
func TestGarbageCollection(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-gc", nil)
	startManager(t, testConfig(), ns)
	hj := builders.MakeHyperJob(ns, "gc").ReplicatedJobs(replicatedJob("a", 3), replicatedJob("b", 2)).Obj()
	create(t, hj)
	waitForChildren(t, timeout, ns, "gc", append(names("gc", "a", 3), names("gc", "b", 2)...))
	cur, _ := getHyperJob(ctx, ns, "gc")
	if len(cur.Finalizers) != 0 {
		t.Errorf("HyperJob has finalizers %v; deletion is the garbage collector's job", cur.Finalizers)
	}
	if err := env.Client.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every child deleted", func(ctx context.Context) (bool, error) {
		jobs, pps, err := children(ctx, ns, "gc")
		if err == nil && len(jobs)+len(pps) > 0 {
			err = fmt.Errorf("left: jobs %v, policies %v", keys(jobs), keys(pps))
		}
		return err == nil, err
	})
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
