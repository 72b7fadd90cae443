package hyperjob

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

func vcjob(name string, phase batchv1alpha1.JobPhase, running, succeeded int32) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{hbv1.ReplicatedJobNameLabel: "a"}},
		Status: batchv1alpha1.JobStatus{State: batchv1alpha1.JobState{Phase: phase}, Running: running, Succeeded: succeeded}}
}

func twoByTwo() *trainingv1alpha1.HyperJob {
	rj := func(n string) trainingv1alpha1.ReplicatedJob {
		return trainingv1alpha1.ReplicatedJob{Name: n, Replicas: 2, TemplateSpec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{task("w", 1, "")}}}
	}
	return hyperJob(rj("a"), rj("b"))
}

func plan(t *testing.T, hj *trainingv1alpha1.HyperJob) *Plan {
	t.Helper()
	p, err := BuildPlan(hj, defaults.Namespace{Name: hj.Namespace}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func jobsOf(js ...*batchv1alpha1.Job) map[string]*batchv1alpha1.Job {
	m := map[string]*batchv1alpha1.Job{}
	for _, j := range js {
		m[j.Name] = j
	}
	return m
}

func TestComputeStatusAggregates(t *testing.T) {
	hj := twoByTwo()
	st, newly := ComputeStatus(hj, plan(t, hj), jobsOf(
		vcjob("hj-a-0", batchv1alpha1.Running, 3, 0), vcjob("hj-a-1", batchv1alpha1.Completed, 0, 2),
		vcjob("hj-b-0", batchv1alpha1.Pending, 0, 0)))
	if newly != nil || len(st.Conditions) != 0 {
		t.Fatalf("no condition expected yet: %+v", st.Conditions)
	}
	if *st.SplitCount != 4 || st.ObservedGeneration != 1 || len(st.ReplicatedJobsStatus) != 2 {
		t.Fatalf("status %+v", st)
	}
	a, b := st.ReplicatedJobsStatus[0], st.ReplicatedJobsStatus[1]
	if a.Name != "a" || a.Running != 3 || a.Succeeded != 2 || len(a.JobStates) != 2 || a.JobStates["hj-a-1"].Phase != batchv1alpha1.Completed {
		t.Errorf("a: %+v", a)
	}
	if b.Name != "b" || len(b.JobStates) != 1 || b.JobStates["hj-b-0"].Phase != batchv1alpha1.Pending {
		t.Errorf("b: %+v (a child not created yet has no state)", b)
	}
}

func TestComputeStatusTerminal(t *testing.T) {
	all := func(p0, p1, p2, p3 batchv1alpha1.JobPhase) map[string]*batchv1alpha1.Job {
		return jobsOf(vcjob("hj-a-0", p0, 0, 0), vcjob("hj-a-1", p1, 0, 0), vcjob("hj-b-0", p2, 0, 0), vcjob("hj-b-1", p3, 0, 0))
	}
	C, F, A, T, R := batchv1alpha1.Completed, batchv1alpha1.Failed, batchv1alpha1.Aborted, batchv1alpha1.Terminated, batchv1alpha1.Running
	cases := []struct {
		name     string
		minAvail *int32
		jobs     map[string]*batchv1alpha1.Job
		want     string // condition type set True, "" for none
	}{
		{"all completed", nil, all(C, C, C, C), ConditionCompleted},
		{"one running", nil, all(C, C, C, R), ""},
		{"all finished, one failed", nil, all(C, C, C, F), ConditionFailed},
		{"aborted and terminated count as finished", nil, all(A, T, C, C), ConditionFailed},
		{"minAvailable reached while others run", ptr.To[int32](2), all(C, R, C, R), ConditionCompleted},
		{"minAvailable reached although others failed", ptr.To[int32](2), all(C, F, C, F), ConditionCompleted},
		{"minAvailable missed", ptr.To[int32](3), all(C, F, C, F), ConditionFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hj := twoByTwo()
			hj.Spec.MinAvailable = tc.minAvail
			st, newly := ComputeStatus(hj, plan(t, hj), tc.jobs)
			for _, typ := range []string{ConditionCompleted, ConditionFailed} {
				if got := apimeta.IsStatusConditionTrue(st.Conditions, typ); got != (typ == tc.want) {
					t.Errorf("%s = %v, want %v", typ, got, typ == tc.want)
				}
			}
			if (newly != nil) != (tc.want != "") || (newly != nil && newly.Type != tc.want) {
				t.Errorf("newly set %+v", newly)
			}
			if tc.want == "" {
				return
			}
			// Frozen: a later, different observation changes nothing but observedGeneration.
			hj.Status = st
			hj.Generation = 2
			st2, newly2 := ComputeStatus(hj, plan(t, hj), all(R, R, R, R))
			if newly2 != nil || st2.ObservedGeneration != 2 || !apimeta.IsStatusConditionTrue(st2.Conditions, tc.want) ||
				st2.ReplicatedJobsStatus[0].JobStates["hj-a-0"].Phase != st.ReplicatedJobsStatus[0].JobStates["hj-a-0"].Phase {
				t.Errorf("finished status moved: %+v", st2)
			}
		})
	}
}

func TestComputeStatusRemembersFinishedChildren(t *testing.T) {
	hj := twoByTwo()
	p := plan(t, hj)
	st, _ := ComputeStatus(hj, p, jobsOf(vcjob("hj-a-0", batchv1alpha1.Completed, 0, 1), vcjob("hj-a-1", batchv1alpha1.Running, 1, 0)))
	hj.Status = st
	// Both disappear: the completed one is remembered, the running one is not.
	st, _ = ComputeStatus(hj, p, nil)
	if s, ok := st.ReplicatedJobsStatus[0].JobStates["hj-a-0"]; !ok || s.Phase != batchv1alpha1.Completed {
		t.Errorf("completed child forgotten: %+v", st.ReplicatedJobsStatus[0])
	}
	if _, ok := st.ReplicatedJobsStatus[0].JobStates["hj-a-1"]; ok {
		t.Error("a running child that disappeared must not be remembered (it is recreated)")
	}
}

func TestComputeStatusRefusal(t *testing.T) {
	hj := twoByTwo()
	hj.Spec.ReplicatedJobs[0].SplitPolicy = &trainingv1alpha1.SplitPolicy{Mode: trainingv1alpha1.SplitModeAuto}
	st, newly := ComputeStatus(hj, plan(t, hj), jobsOf(vcjob("hj-a-0", batchv1alpha1.Running, 1, 0)))
	c := apimeta.FindStatusCondition(st.Conditions, ConditionSplitPolicyInvalid)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonMissingAcceleratorType || newly == nil {
		t.Fatalf("condition %+v newly %+v", c, newly)
	}
	if *st.SplitCount != 1 || st.ReplicatedJobsStatus[0].Running != 1 {
		t.Errorf("existing children still reported: %+v", st)
	}
	hj.Status = st
	hj.Spec.ReplicatedJobs[0].SplitPolicy = nil
	st, _ = ComputeStatus(hj, plan(t, hj), nil)
	if c := apimeta.FindStatusCondition(st.Conditions, ConditionSplitPolicyInvalid); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonValid {
		t.Fatalf("fixed spec: condition %+v", c)
	}
}

func TestSlowStart(t *testing.T) {
	var calls atomic.Int32
	if err := slowStart(1000, func(int) error { calls.Add(1); return nil }); err != nil || calls.Load() != 1000 {
		t.Fatalf("calls %d err %v", calls.Load(), err)
	}
	calls.Store(0)
	err := slowStart(1000, func(i int) error {
		calls.Add(1)
		if i >= 3 {
			return errors.New("quota")
		}
		return nil
	})
	// Batches 1, 2, 4: the third batch (indexes 3..6) fails; nothing after it runs.
	if err == nil || calls.Load() != 7 || !strings.Contains(err.Error(), "993 more children not attempted") {
		t.Fatalf("calls %d err %v", calls.Load(), err)
	}
}
