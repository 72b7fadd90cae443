//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	e2efw "github.com/hyperbatch/hyperbatch/test/e2e/framework"
)

const (
	deadlineAnnotation = "hyperbatch.dev/active-deadline-seconds"
	ttlAnnotation      = "hyperbatch.dev/ttl-seconds-after-finished"
)

func pausePod() corev1.PodTemplateSpec {
	n := e2efw.Workload()
	p := corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{n.RunningContainer("c", 10*time.Minute)}}}
	n.Apply(&p.Spec)
	return p
}

// unplaceablePod is pausePod pinned to a node label no node has: it stays Pending.
func unplaceablePod() corev1.PodTemplateSpec {
	p := pausePod()
	p.Spec.NodeSelector = map[string]string{"hyperbatch.dev/e2e-no-such-node": "true"}
	return p
}

// The deployed manager fails a HyperJob at its deadline and deletes it at its TTL; the cluster's
// garbage collector removes its children first (foreground), and none is recreated.
func TestHyperJobDeadlineAndTTL(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	hj := &trainingv1alpha1.HyperJob{
		ObjectMeta: metav1.ObjectMeta{Name: "short", Namespace: ns,
			Annotations: map[string]string{deadlineAnnotation: "5", ttlAnnotation: "5"}},
		Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "w", Replicas: 2,
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: pausePod()}}}}}},
	}
	if err := c.Create(ctx, hj); err != nil {
		t.Fatal(err)
	}
	children := func(ctx context.Context) (int, error) {
		var jobs batchv1alpha1.JobList
		err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{"volcano.sh/hyperjob-name": hj.Name})
		return len(jobs.Items), err
	}
	e2efw.Poll(t, 60*time.Second, "2 child Volcano Jobs", func(ctx context.Context) (bool, error) {
		n, err := children(ctx)
		return n == 2, err
	})
	var failedAt time.Time
	e2efw.Poll(t, 60*time.Second, "Failed/DeadlineExceeded", func(ctx context.Context) (bool, error) {
		var cur trainingv1alpha1.HyperJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(cur.Status.Conditions, "Failed")
		if cond == nil || cond.Status != metav1.ConditionTrue {
			return false, nil
		}
		if cond.Reason != "DeadlineExceeded" {
			return false, fmt.Errorf("Failed with reason %s", cond.Reason)
		}
		failedAt = cond.LastTransitionTime.Time
		return true, nil
	})
	if d := failedAt.Sub(hj.CreationTimestamp.Time); d < 4*time.Second || d > 8*time.Second {
		t.Errorf("Failed %s after creation, want about 5s", d)
	}
	e2efw.Poll(t, 60*time.Second, "the HyperJob and its children deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(hj), &trainingv1alpha1.HyperJob{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		n, err := children(ctx)
		return n == 0, err
	})
}

// requireVolcano fails when Volcano's job controller does not run in the cluster (the e2e cluster
// always starts it): the positive signal is the PodGroup it creates for a Volcano Job.
func requireVolcano(t *testing.T, ns string) {
	t.Helper()
	probe := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "volcano-probe", Namespace: ns},
		Spec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: pausePod()}}}}
	if err := c.Create(context.Background(), probe); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var pgs schedulingv1beta1.PodGroupList
		if err := c.List(ctx, &pgs, client.InNamespace(ns)); err == nil && len(pgs.Items) > 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("Volcano's job controller does not run in this cluster (no PodGroup for a Volcano Job within 30s): start the cluster with Volcano (hack/localcluster without --no-volcano)")
}

// With Volcano's real job controller: a started Volcano Job (enqueued, pods created) past its deadline is aborted through the
// AbortJob command; its pods are gone, its state is Aborted and its PodGroup is removed.
func TestVolcanoJobDeadlineAborts(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	requireVolcano(t, ns)
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "overdue", Namespace: ns,
		Annotations: map[string]string{deadlineAnnotation: "15"}},
		// hyperbatch's PodGroup status controller enqueues it (schedulerName hyperbatch-scheduler), so
		// Volcano's job controller creates its pods. kwok's default pod-complete stage ends every pod
		// owned by a kind "Job" as soon as it runs, so a bound job would finish long before its deadline;
		// its pods ask for a node label no node has and stay Pending: the job is started (Inqueue, pods
		// created) and stays unfinished until the deadline aborts it.
		Spec: batchv1alpha1.JobSpec{MinAvailable: 2, SchedulerName: "hyperbatch-scheduler",
			Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 2, Template: unplaceablePod()}}}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	pods := func(ctx context.Context) (int, error) {
		var l corev1.PodList
		err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job.Name})
		return len(l.Items), err
	}
	e2efw.Poll(t, 60*time.Second, "Volcano's job controller creates the 2 pods", func(ctx context.Context) (bool, error) {
		n, err := pods(ctx)
		return n == 2, err
	})
	e2efw.Poll(t, 60*time.Second, "Aborted, pods gone, PodGroup removed", func(ctx context.Context) (bool, error) {
		var cur batchv1alpha1.Job
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &cur); err != nil {
			return false, err
		}
		n, err := pods(ctx)
		if err != nil {
			return false, err
		}
		var pgs schedulingv1beta1.PodGroupList
		if err := c.List(ctx, &pgs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		ownPG := 0
		for _, pg := range pgs.Items {
			if metav1.IsControlledBy(&pg, &cur) {
				ownPG++
			}
		}
		return cur.Status.State.Phase == batchv1alpha1.Aborted && n == 0 && ownPG == 0 &&
			cur.Annotations["hyperbatch.dev/termination-reason"] == "DeadlineExceeded", nil
	})
}

// With the JobSet controller: a running JobSet past its deadline ends Failed with reason
// DeadlineExceeded, and its Jobs and pods are gone.
func TestJobSetDeadlineFails(t *testing.T) {
	ctx := context.Background()
	ns := primary.Namespace(t)
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "overdue", Namespace: ns,
		Annotations: map[string]string{deadlineAnnotation: "15"}},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 2,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), Template: pausePod()}}}}}}
	if err := c.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	count := func(ctx context.Context) (int, int, error) {
		sel := client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: js.Name}
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), sel); err != nil {
			return 0, 0, err
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), sel); err != nil {
			return 0, 0, err
		}
		return len(jobs.Items), len(pods.Items), nil
	}
	ctxProbe, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if j, _, err := count(ctxProbe); err == nil && j > 0 {
			break
		}
		if ctxProbe.Err() != nil {
			t.Fatal("the JobSet controller does not run in this cluster (no Job for a JobSet within 30s): start the cluster with JobSet (hack/localcluster without --no-jobset)")
		}
		time.Sleep(250 * time.Millisecond)
	}
	e2efw.Poll(t, 90*time.Second, "Failed/DeadlineExceeded with no Jobs and no pods left", func(ctx context.Context) (bool, error) {
		var cur jobsetv1alpha2.JobSet
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), &cur); err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(cur.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "DeadlineExceeded" {
			return false, nil
		}
		j, p, err := count(ctx)
		return j == 0 && p == 0, err
	})
}
