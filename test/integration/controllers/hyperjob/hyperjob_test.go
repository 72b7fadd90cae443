package hyperjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const timeout = 30 * time.Second

// Children are exactly as specified: names, labels, hashes, controller reference, field manager, the
// PropagationPolicy's shape, WorkloadPolicy defaults for what the HyperJob leaves open; and a
// WorkloadPolicy change updates the PropagationPolicy in place.
func TestCreateChildren(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-create", map[string]string{"team": "create"})
	pol := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hj-create"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "create"}},
		Defaults: hbv1.PolicyDefaults{Queue: "team-create", Propagation: &hbv1.Propagation{
			ClusterNames: []string{"p1", "p2"}, MaxClusters: ptr.To[int32](2)}}}}
	create(t, pol)
	startManager(t, testConfig(), ns)

	hj := builders.MakeHyperJob(ns, "train").ReplicatedJobs(replicatedJob("a", 2, "c1", "c2"), replicatedJob("b", 1)).Obj()
	create(t, hj)
	jobs, pps := waitForChildren(t, timeout, ns, "train", []string{"train-a-0", "train-a-1", "train-b-0"})

	hj, _ = getHyperJob(ctx, ns, "train")
	for name, j := range jobs {
		rj := strings.Split(name, "-")[1]
		spec := hj.Spec.ReplicatedJobs[slices.IndexFunc(hj.Spec.ReplicatedJobs, func(r trainingv1alpha1.ReplicatedJob) bool { return r.Name == rj })].TemplateSpec
		wantHash, _ := hyperjob.Hash(&spec)
		if j.Labels[hbv1.HyperJobNameLabel] != "train" || j.Labels[hbv1.ReplicatedJobNameLabel] != rj ||
			j.Labels[hbv1.VCJobTemplateSpecHashLabel] != wantHash {
			t.Errorf("job %s labels %v (want template hash %s)", name, j.Labels, wantHash)
		}
		if !metav1.IsControlledBy(j, hj) {
			t.Errorf("job %s is not controlled by the HyperJob: %+v", name, j.OwnerReferences)
		}
		if j.Spec.Queue != "team-create" {
			t.Errorf("job %s queue %q: the HyperJob's schema default \"default\" must be filled from the WorkloadPolicy", name, j.Spec.Queue)
		}
		if len(j.ManagedFields) == 0 || j.ManagedFields[0].Manager != hyperjob.FieldOwner {
			t.Errorf("job %s field manager %+v", name, j.ManagedFields)
		}
	}
	for name, pp := range pps {
		rj := strings.Split(name, "-")[1]
		wantClusters := []string{"c1", "c2"}
		if rj == "b" {
			wantClusters = []string{"p1", "p2"} // left open by the HyperJob: the WorkloadPolicy's
		}
		want := policyv1alpha1.PropagationSpec{
			PropagateDeps:     true,
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: name}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: wantClusters},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: "Divided",
					ReplicaDivisionPreference: "Aggregated"},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "cluster", MinGroups: 1, MaxGroups: 1}},
			},
		}
		got := pp.Spec
		if got.PropagateDeps != want.PropagateDeps || !equalJSON(got.ResourceSelectors, want.ResourceSelectors) ||
			!equalJSON(got.Placement.ClusterAffinity, want.Placement.ClusterAffinity) ||
			!equalJSON(got.Placement.ReplicaScheduling, want.Placement.ReplicaScheduling) ||
			!equalJSON(got.Placement.SpreadConstraints, want.Placement.SpreadConstraints) {
			t.Errorf("PropagationPolicy %s spec\n got %s\nwant %s", name, toJSON(got), toJSON(want))
		}
		if pp.Labels[hbv1.HyperJobNameLabel] != "train" || pp.Labels[hbv1.ReplicatedJobNameLabel] != rj ||
			len(pp.Labels[hbv1.PPSpecHashLabel]) != hyperjob.HashLength || !metav1.IsControlledBy(pp, hj) {
			t.Errorf("PropagationPolicy %s labels %v owners %+v", name, pp.Labels, pp.OwnerReferences)
		}
		// Created, not applied: a Create never adopts an object of the same name.
		if pp.ManagedFields[0].Manager != hyperjob.FieldOwner || pp.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
			t.Errorf("PropagationPolicy %s managed by %+v, want a create by %s", name, pp.ManagedFields[0], hyperjob.FieldOwner)
		}
	}
	waitFor(t, timeout, "status", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "train")
		return err == nil && hj.Status.SplitCount != nil && *hj.Status.SplitCount == 3 && hj.Status.ObservedGeneration == hj.Generation &&
			len(hj.Status.ReplicatedJobsStatus) == 2 && len(hj.Status.ReplicatedJobsStatus[0].JobStates) == 2, err
	})
	waitForEvent(t, ns, "train", hyperjob.ReasonSyncedChildren, "created 3 PropagationPolicies (train-a-0, train-a-1, train-b-0)")
	waitForEvent(t, ns, "train", hyperjob.ReasonSyncedChildren, "created 3 Volcano Jobs (train-a-0, train-a-1, train-b-0)")

	// A WorkloadPolicy change: the policy-filled PropagationPolicy is updated in place, the Volcano
	// Jobs (whose template hash ignores policies) are not touched.
	uids := map[string]types.UID{}
	for n, j := range jobs {
		uids[n] = j.UID
	}
	ppUID := pps["train-b-0"].UID
	var p hbv1.WorkloadPolicy
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pol), &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Defaults.Propagation.ClusterNames = []string{"p3"}
	if err := env.Client.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, timeout, "PropagationPolicy train-b-0 to follow the policy", func(ctx context.Context) (bool, error) {
		jobs, pps, err := children(ctx, ns, "train")
		if err != nil {
			return false, err
		}
		pp := pps["train-b-0"]
		if pp == nil || pp.UID != ppUID {
			return false, fmt.Errorf("PropagationPolicy replaced or missing")
		}
		for n, j := range jobs {
			if j.UID != uids[n] {
				return false, fmt.Errorf("job %s recreated by a policy change", n)
			}
		}
		return slices.Equal(pp.Spec.Placement.ClusterAffinity.ClusterNames, []string{"p3"}), nil
	})

	// Drift: an edit of a field the controller owns is put back; a field someone else adds is kept
	// and does not make the controller apply again and again.
	var edited policyv1alpha1.PropagationPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train-a-0"}, &edited); err != nil {
		t.Fatal(err)
	}
	edited.Spec.Placement.ClusterAffinity.ClusterNames = []string{"elsewhere"}
	edited.Spec.Placement.ClusterAffinity.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"gpu": "h100"}}
	if err := env.Client.Update(ctx, &edited, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	var restored policyv1alpha1.PropagationPolicy
	waitFor(t, timeout, "clusterNames put back", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train-a-0"}, &restored)
		return err == nil && slices.Equal(restored.Spec.Placement.ClusterAffinity.ClusterNames, []string{"c1", "c2"}), err
	})
	if restored.Spec.Placement.ClusterAffinity.LabelSelector == nil {
		t.Error("a field the controller does not own was removed")
	}
	// A controller that applies in a loop would change the policy again during a whole reconcile.
	waitForFullReconcile(t, ns, "train", 3)
	var later policyv1alpha1.PropagationPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train-a-0"}, &later); err != nil {
		t.Fatal(err)
	}
	if later.ResourceVersion != restored.ResourceVersion {
		t.Errorf("PropagationPolicy keeps changing (resourceVersion %s → %s): the controller applies in a loop", restored.ResourceVersion, later.ResourceVersion)
	}
}

// Scaling a replicatedJob up creates the new indexes, scaling down deletes the highest ones (job and
// PropagationPolicy), and removing a replicatedJob deletes all its children.
func TestScale(t *testing.T) {
	ns := newNamespace(t, "hj-scale", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "s").ReplicatedJobs(replicatedJob("a", 2), replicatedJob("b", 1)).Obj())
	jobs, _ := waitForChildren(t, timeout, ns, "s", append(names("s", "a", 2), "s-b-0"))
	a0 := jobs["s-a-0"].UID

	updateHyperJob(t, ns, "s", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].Replicas = 5 })
	jobs, _ = waitForChildren(t, timeout, ns, "s", append(names("s", "a", 5), "s-b-0"))
	if jobs["s-a-0"].UID != a0 {
		t.Error("scaling up recreated an existing child")
	}

	updateHyperJob(t, ns, "s", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].Replicas = 1 })
	jobs, _ = waitForChildren(t, timeout, ns, "s", []string{"s-a-0", "s-b-0"})
	if jobs["s-a-0"].UID != a0 {
		t.Error("scaling down recreated a kept child")
	}
	waitForEvent(t, ns, "s", hyperjob.ReasonSyncedChildren, "deleted 4 Volcano Jobs no longer in the spec (s-a-1, s-a-2, s-a-3, … 1 more)")

	updateHyperJob(t, ns, "s", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs = hj.Spec.ReplicatedJobs[:1] })
	waitForChildren(t, timeout, ns, "s", []string{"s-a-0"})
	waitFor(t, timeout, "status without b", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "s")
		return err == nil && len(hj.Status.ReplicatedJobsStatus) == 1 && *hj.Status.SplitCount == 1, err
	})
}

// A template change recreates the children (new UIDs) one at a time, with an Event each, leaves a
// child that already finished alone, and updates PropagationPolicies in place (same UID).
func TestTemplateChangeRecreatesChildren(t *testing.T) {
	ns := newNamespace(t, "hj-template", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "tpl").ReplicatedJobs(replicatedJob("a", 4, "c1")).Obj())
	want := names("tpl", "a", 4)
	jobs, pps := waitForChildren(t, timeout, ns, "tpl", want)
	oldJob, oldPP := map[string]types.UID{}, map[string]types.UID{}
	for _, n := range want {
		oldJob[n], oldPP[n] = jobs[n].UID, pps[n].UID
	}
	setJobStatus(t, ns, "tpl-a-3", batchv1alpha1.Completed, nil)
	waitFor(t, timeout, "tpl-a-3 recorded as Completed", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "tpl")
		return err == nil && len(hj.Status.ReplicatedJobsStatus) == 1 &&
			hj.Status.ReplicatedJobsStatus[0].JobStates["tpl-a-3"].Phase == batchv1alpha1.Completed, err
	})

	// Watch the rollout: at no point may two children be absent or terminating at once. A watch
	// without a resourceVersion first replays every existing job as ADDED.
	disruption := watchDisruption(t, ns, want)

	updateHyperJob(t, ns, "tpl", func(hj *trainingv1alpha1.HyperJob) {
		hj.Spec.ReplicatedJobs[0].TemplateSpec.Tasks[0].Template = builders.PodTemplate("busybox:2", 0)
		hj.Spec.ReplicatedJobs[0].ClusterNames = []string{"c2"}
	})
	hj, _ := getHyperJob(context.Background(), ns, "tpl")
	newHash, _ := hyperjob.Hash(&hj.Spec.ReplicatedJobs[0].TemplateSpec)

	waitFor(t, 60*time.Second, "every unfinished child recreated from the new template", func(ctx context.Context) (bool, error) {
		jobs, pps, err := children(ctx, ns, "tpl")
		if err != nil {
			return false, err
		}
		for _, n := range want {
			if j := jobs[n]; j == nil || j.DeletionTimestamp != nil {
				return false, fmt.Errorf("%s absent or terminating", n)
			}
		}
		for _, n := range want[:3] {
			if jobs[n].UID == oldJob[n] || jobs[n].Labels[hbv1.VCJobTemplateSpecHashLabel] != newHash {
				return false, fmt.Errorf("%s not recreated yet", n)
			}
			if jobs[n].Spec.Tasks[0].Template.Spec.Containers[0].Image != "busybox:2" {
				return false, fmt.Errorf("%s has the old image", n)
			}
		}
		for _, n := range want {
			if pps[n].UID != oldPP[n] {
				return false, fmt.Errorf("PropagationPolicy %s was replaced, want an update in place", n)
			}
			if !slices.Equal(pps[n].Spec.Placement.ClusterAffinity.ClusterNames, []string{"c2"}) {
				return false, fmt.Errorf("PropagationPolicy %s not updated", n)
			}
		}
		if jobs["tpl-a-3"].UID != oldJob["tpl-a-3"] {
			return false, fmt.Errorf("the finished child tpl-a-3 was recreated")
		}
		return true, nil
	})
	maxDisrupted, events := disruption()
	t.Logf("rollout seen through a watch: %d job events, at most %d child(ren) absent or terminating at once", events, maxDisrupted)
	if events < 9 { // per recreated child: terminating, deleted, added
		t.Errorf("the watch saw only %d events; want at least 9", events)
	}
	if maxDisrupted > 1 {
		t.Errorf("saw %d children absent or terminating at once; recreation must go one child at a time", maxDisrupted)
	}
	// One RecreatingJob Event for the rollout; each child's recreation is in a pass summary.
	waitForEvent(t, ns, "tpl", hyperjob.ReasonRecreatingJob, "recreating its 3 unfinished children one at a time")
	if evs, _ := eventsFor(context.Background(), ns, "tpl", hyperjob.ReasonRecreatingJob); len(evs) != 1 {
		t.Errorf("%d RecreatingJob events, want 1", len(evs))
	}
	for _, n := range want[:3] {
		waitForEvent(t, ns, "tpl", hyperjob.ReasonSyncedChildren, "deleted 1 Volcano Job to recreate from the changed template ("+n+")")
	}
	waitForEvent(t, ns, "tpl", hyperjob.ReasonSyncedChildren, "updated 4 PropagationPolicies in place (tpl-a-0")
}

// Status aggregates the children's states and pod counts; Completed is set when all children
// completed, never flips back, and a finished HyperJob does not recreate a child that disappears.
func TestStatusAndTerminalGuard(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-status", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "st").ReplicatedJobs(replicatedJob("a", 2), replicatedJob("b", 1)).Obj())
	waitForChildren(t, timeout, ns, "st", []string{"st-a-0", "st-a-1", "st-b-0"})

	setJobStatus(t, ns, "st-a-0", batchv1alpha1.Running, func(s *batchv1alpha1.JobStatus) { s.Running, s.Pending = 3, 1 })
	setJobStatus(t, ns, "st-a-1", batchv1alpha1.Running, func(s *batchv1alpha1.JobStatus) { s.Running, s.Failed, s.Unknown = 2, 1, 1 })
	setJobStatus(t, ns, "st-b-0", batchv1alpha1.Pending, func(s *batchv1alpha1.JobStatus) { s.Pending, s.Terminating = 4, 2 })
	waitFor(t, timeout, "aggregated pod counts", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "st")
		if err != nil || len(hj.Status.ReplicatedJobsStatus) != 2 {
			return false, err
		}
		a, b := hj.Status.ReplicatedJobsStatus[0], hj.Status.ReplicatedJobsStatus[1]
		return a.Running == 5 && a.Pending == 1 && a.Failed == 1 && a.Unknown == 1 &&
			a.JobStates["st-a-0"].Phase == batchv1alpha1.Running && b.Pending == 4 && b.Terminating == 2 &&
			b.JobStates["st-b-0"].Phase == batchv1alpha1.Pending && len(hj.Status.Conditions) == 0, nil
	})

	for _, n := range []string{"st-a-0", "st-a-1", "st-b-0"} {
		setJobStatus(t, ns, n, batchv1alpha1.Completed, func(s *batchv1alpha1.JobStatus) { s.Running, s.Pending, s.Succeeded = 0, 0, 2 })
	}
	waitFor(t, timeout, "Completed", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "st")
		return err == nil && apimeta.IsStatusConditionTrue(hj.Status.Conditions, hyperjob.ConditionCompleted) &&
			apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionFailed) == nil, err
	})
	waitForEvent(t, ns, "st", hyperjob.ReasonChildrenCompleted, "3 of 3 child jobs completed")

	// The terminal guard: a child that goes back to Running and a child that disappears change nothing.
	setJobStatus(t, ns, "st-a-0", batchv1alpha1.Running, nil)
	var gone batchv1alpha1.Job
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "st-b-0"}, &gone); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &gone); err != nil {
		t.Fatal(err)
	}
	// Scaling a finished HyperJob does nothing either.
	updateHyperJob(t, ns, "st", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].Replicas = 3 })
	waitFor(t, timeout, "observedGeneration of the scaled, finished HyperJob", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "st")
		return err == nil && hj.Status.ObservedGeneration == hj.Generation, err
	})
	// observedGeneration is written after the children are synced: a wrong controller has acted by now.
	// The deleted child's PropagationPolicy goes with it, even though the HyperJob is finished.
	waitForEvent(t, ns, "st", hyperjob.ReasonSyncedChildren, "deleted 1 PropagationPolicy whose finished Volcano Job is gone (st-b-0)")
	jobs, pps, err := children(ctx, ns, "st")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(jobs); !slices.Equal(got, []string{"st-a-0", "st-a-1"}) {
		t.Errorf("children of the finished HyperJob %v, want [st-a-0 st-a-1]: nothing recreated or added", got)
	}
	if got := keys(pps); !slices.Equal(got, []string{"st-a-0", "st-a-1"}) {
		t.Errorf("PropagationPolicies of the finished HyperJob %v, want [st-a-0 st-a-1]: st-b-0's went with its job", got)
	}
	hj, _ := getHyperJob(ctx, ns, "st")
	if !apimeta.IsStatusConditionTrue(hj.Status.Conditions, hyperjob.ConditionCompleted) ||
		hj.Status.ReplicatedJobsStatus[0].JobStates["st-a-0"].Phase != batchv1alpha1.Completed ||
		hj.Status.ReplicatedJobsStatus[1].JobStates["st-b-0"].Phase != batchv1alpha1.Completed {
		t.Errorf("the finished status moved: %+v", hj.Status)
	}
}

// Failed: every child finished and fewer than minAvailable completed. With minAvailable 2 of 3,
// one failure is tolerated, two are not.
func TestFailedWithMinAvailable(t *testing.T) {
	ns := newNamespace(t, "hj-failed", nil)
	startManager(t, testConfig(), ns)
	for _, name := range []string{"ok", "bad"} {
		hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(replicatedJob("a", 3)).Obj()
		hj.Spec.MinAvailable = ptr.To[int32](2)
		create(t, hj)
		waitForChildren(t, timeout, ns, name, names(name, "a", 3))
	}
	setJobStatus(t, ns, "ok-a-0", batchv1alpha1.Failed, nil)
	setJobStatus(t, ns, "ok-a-1", batchv1alpha1.Completed, nil)
	setJobStatus(t, ns, "ok-a-2", batchv1alpha1.Completed, nil)
	setJobStatus(t, ns, "bad-a-0", batchv1alpha1.Failed, nil)
	setJobStatus(t, ns, "bad-a-1", batchv1alpha1.Aborted, nil)
	setJobStatus(t, ns, "bad-a-2", batchv1alpha1.Running, nil)
	waitFor(t, timeout, "ok Completed", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "ok")
		return err == nil && apimeta.IsStatusConditionTrue(hj.Status.Conditions, hyperjob.ConditionCompleted), err
	})
	// The positive signal: bad's status records all three children's phases.
	waitFor(t, timeout, "bad's children recorded", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "bad")
		if err != nil || len(hj.Status.ReplicatedJobsStatus) != 1 {
			return false, err
		}
		st := hj.Status.ReplicatedJobsStatus[0].JobStates
		return st["bad-a-0"].Phase == batchv1alpha1.Failed && st["bad-a-1"].Phase == batchv1alpha1.Aborted &&
			st["bad-a-2"].Phase == batchv1alpha1.Running, nil
	})
	if hj, _ := getHyperJob(context.Background(), ns, "bad"); len(hj.Status.Conditions) != 0 {
		t.Fatalf("bad has a child still running; no terminal condition yet: %+v", hj.Status.Conditions)
	}
	setJobStatus(t, ns, "bad-a-2", batchv1alpha1.Completed, nil)
	waitFor(t, timeout, "bad Failed", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "bad")
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionFailed)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "only 1 completed, fewer than minAvailable 2") &&
			apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionCompleted) == nil, nil
	})
	waitForEvent(t, ns, "bad", hyperjob.ReasonChildrenFailed, "fewer than minAvailable 2")
}

// Static split arithmetic end to end; a template that does not divide is refused with the numbers and
// no children; auto mode is refused as unsupported; fixing the spec clears the condition.
func TestSplitPolicy(t *testing.T) {
	ns := newNamespace(t, "hj-split", nil)
	startManager(t, testConfig(), ns)
	split := func(name string, mode trainingv1alpha1.SplitMode, accel int) *trainingv1alpha1.HyperJob {
		// 1 launcher without GPUs + 16 workers × 2 GPUs = 32 GPUs per replica, 2 replicas.
		rj := trainingv1alpha1.ReplicatedJob{Name: "t", Replicas: 2,
			SplitPolicy: &trainingv1alpha1.SplitPolicy{Mode: mode, Accelerators: ptr.To(accel), AcceleratorType: ptr.To(gpu)},
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 17, Tasks: []batchv1alpha1.TaskSpec{
				{Name: "launcher", Replicas: 1, Template: builders.PodTemplate("launcher:1", 0)},
				{Name: "worker", Replicas: 16, Template: builders.PodTemplate("trainer:1", 2)},
			}}}
		return builders.MakeHyperJob(ns, name).ReplicatedJobs(rj).Obj()
	}

	create(t, split("good", trainingv1alpha1.SplitModeStatic, 8))
	jobs, _ := waitForChildren(t, timeout, ns, "good", names("good", "t", 8)) // 2 replicas × 32/8
	for n, j := range jobs {
		tasks := j.Spec.Tasks
		if len(tasks) != 2 || tasks[0].Replicas != 1 || tasks[1].Replicas != 4 || j.Spec.MinAvailable != 5 {
			t.Errorf("%s: tasks %s/%d %s/%d minAvailable %d; want launcher 1, worker 4, minAvailable 5",
				n, tasks[0].Name, tasks[0].Replicas, tasks[1].Name, tasks[1].Replicas, j.Spec.MinAvailable)
		}
	}
	waitFor(t, timeout, "splitCount 8", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "good")
		return err == nil && hj.Status.SplitCount != nil && *hj.Status.SplitCount == 8, err
	})

	create(t, split("uneven", trainingv1alpha1.SplitModeStatic, 12))
	create(t, split("auto", trainingv1alpha1.SplitModeAuto, 8))
	for _, tc := range []struct{ name, reason, msg string }{
		{"uneven", hyperjob.ReasonNotDivisible, "requests 32 nvidia.com/gpu in total, which is not a multiple of accelerators=12"},
		{"auto", hyperjob.ReasonAutoNeedsKarmada, "serves no Karmada Clusters (cluster.karmada.io)"},
	} {
		waitFor(t, timeout, tc.name+" refused", func(ctx context.Context) (bool, error) {
			hj, err := getHyperJob(ctx, ns, tc.name)
			if err != nil {
				return false, err
			}
			c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionSplitPolicyInvalid)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == tc.reason && strings.Contains(c.Message, tc.msg) &&
				hj.Status.ObservedGeneration == hj.Generation, nil
		})
		waitForEvent(t, ns, tc.name, tc.reason, tc.msg)
	}
	// Each refusal above was waited for with its observedGeneration: the reconcile that refused is over.
	for _, n := range []string{"uneven", "auto"} {
		if jobs, pps, _ := children(context.Background(), ns, n); len(jobs)+len(pps) != 0 {
			t.Errorf("%s: refused HyperJob has children %v %v", n, keys(jobs), keys(pps))
		}
	}

	// Fixed: 32 / 16 → 2 children per replica.
	updateHyperJob(t, ns, "uneven", func(hj *trainingv1alpha1.HyperJob) { hj.Spec.ReplicatedJobs[0].SplitPolicy.Accelerators = ptr.To(16) })
	waitForChildren(t, timeout, ns, "uneven", names("uneven", "t", 4))
	waitFor(t, timeout, "condition cleared", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "uneven")
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionSplitPolicyInvalid)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == hyperjob.ReasonValid, nil
	})
}

// A Volcano Job with a child's name that the HyperJob does not control is left alone, and reported.
func TestForeignChildName(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-foreign", nil)
	startManager(t, testConfig(), ns)
	foreign := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "f-a-0", Namespace: ns},
		Spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: builders.PodTemplate("mine:1", 0)}}}}
	create(t, foreign)
	create(t, builders.MakeHyperJob(ns, "f").ReplicatedJobs(replicatedJob("a", 1)).Obj())
	waitForEvent(t, ns, "f", "ChildNameTaken", "Volcano Job f-a-0 exists and is not controlled by this HyperJob")
	var j batchv1alpha1.Job
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &j); err != nil {
		t.Fatal(err)
	}
	if j.UID != foreign.UID || len(j.OwnerReferences) != 0 || j.Spec.Tasks[0].Template.Spec.Containers[0].Image != "mine:1" {
		t.Errorf("the foreign job was changed: %+v", j.ObjectMeta)
	}
	// Once it is gone, the child is created.
	if err := env.Client.Delete(ctx, &j); err != nil {
		t.Fatal(err)
	}
	waitForChildren(t, 60*time.Second, ns, "f", []string{"f-a-0"})
}

// A child that finished and is then deleted (as a Volcano ttlSecondsAfterFinished does) while the
// HyperJob still runs is not recreated: its recorded state stands and counts towards completion.
func TestFinishedChildDeletedIsNotRecreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hj-ttl", nil)
	startManager(t, testConfig(), ns)
	create(t, builders.MakeHyperJob(ns, "ttl").ReplicatedJobs(replicatedJob("a", 2)).Obj())
	jobs, _ := waitForChildren(t, timeout, ns, "ttl", names("ttl", "a", 2))
	setJobStatus(t, ns, "ttl-a-0", batchv1alpha1.Completed, func(s *batchv1alpha1.JobStatus) { s.Succeeded, s.Failed = 4, 1 })
	waitFor(t, timeout, "ttl-a-0 recorded as Completed", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "ttl")
		return err == nil && len(hj.Status.ReplicatedJobsStatus) == 1 &&
			hj.Status.ReplicatedJobsStatus[0].JobStates["ttl-a-0"].Phase == batchv1alpha1.Completed, err
	})
	// Volcano lowers a finished job's counts as its pods go: the HyperJob keeps the final ones.
	setJobStatus(t, ns, "ttl-a-0", batchv1alpha1.Completed, func(s *batchv1alpha1.JobStatus) { s.Succeeded, s.Failed = 1, 0 })
	waitForFullReconcile(t, ns, "ttl", 2)
	if hj, err := getHyperJob(ctx, ns, "ttl"); err != nil || hj.Status.ReplicatedJobsStatus[0].Succeeded != 4 || hj.Status.ReplicatedJobsStatus[0].Failed != 1 {
		t.Fatalf("after ttl-a-0 reported fewer pods: %+v (%v); want its final 4 succeeded and 1 failed", hj.Status.ReplicatedJobsStatus, err)
	}
	if err := env.Client.Delete(ctx, jobs["ttl-a-0"]); err != nil {
		t.Fatal(err)
	}
	// The job is not recreated, even after a whole reconcile that follows the deletion, and its
	// PropagationPolicy goes with it (nothing will create that job again).
	waitForFullReconcile(t, ns, "ttl", 2)
	waitForEvent(t, ns, "ttl", hyperjob.ReasonSyncedChildren, "deleted 1 PropagationPolicy whose finished Volcano Job is gone (ttl-a-0)")
	got, pps, err := children(ctx, ns, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys(got), []string{"ttl-a-1"}) || !slices.Equal(keys(pps), []string{"ttl-a-1"}) {
		t.Fatalf("jobs %v policies %v; want only ttl-a-1 (ttl-a-0 finished and deleted, its policy with it)", keys(got), keys(pps))
	}
	setJobStatus(t, ns, "ttl-a-1", batchv1alpha1.Completed, func(s *batchv1alpha1.JobStatus) { s.Succeeded = 2 })
	waitFor(t, timeout, "Completed with the deleted child counted", func(ctx context.Context) (bool, error) {
		hj, err := getHyperJob(ctx, ns, "ttl")
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(hj.Status.Conditions, hyperjob.ConditionCompleted)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "2 of 2"), nil
	})
	hj, err := getHyperJob(ctx, ns, "ttl")
	require.NoError(t, err)
	assert.Equal(t, [2]int32{6, 1}, [2]int32{hj.Status.ReplicatedJobsStatus[0].Succeeded, hj.Status.ReplicatedJobsStatus[0].Failed},
		"final counts: the deleted ttl-a-0's 4+1 and ttl-a-1's 2")
}
