package hyperjob

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
)

// HyperJob status condition types.
const (
	// ConditionCompleted and ConditionFailed are the terminal conditions (internal/hyperjobstatus).
	ConditionCompleted = hyperjobstatus.ConditionCompleted
	ConditionFailed    = hyperjobstatus.ConditionFailed
	// ConditionSplitPolicyInvalid is True while a replicatedJob's splitPolicy cannot be applied; no
	// children are created or changed.
	ConditionSplitPolicyInvalid = "SplitPolicyInvalid"
	// ConditionSpecInvalid is True while another part of the spec (names, minAvailable, maxDomains)
	// cannot be honoured; no children are created or changed.
	ConditionSpecInvalid = "SpecInvalid"
	// ConditionAutoSplit is the decision of mode auto (autosplit.go): True (reason AutoSplitDecided)
	// with the split once decided, False (reason NoSplitFits) with the members' numbers while no
	// split fits, False (reason AutoSplitRefused) when Karmada refused the split decided the second
	// time (autorefused.go).
	ConditionAutoSplit = "AutoSplit"
)

// Condition reasons.
const (
	ReasonMixedPodDemand             = "MixedPodDemand"
	ReasonUnsupportedTopology        = "UnsupportedTopology"
	ReasonAutoNeedsKarmada           = "AutoNeedsKarmada"
	ReasonMixedSplitModes            = "MixedSplitModes"
	ReasonAutoSplitFixed             = "AutoSplitFixed"
	ReasonAutoSplitDecided           = "AutoSplitDecided"
	ReasonNoSplitFits                = "NoSplitFits"
	ReasonUnknownSplitMode           = "UnknownSplitMode"
	ReasonMissingAcceleratorType     = "MissingAcceleratorType"
	ReasonMissingAccelerators        = "MissingAccelerators"
	ReasonInvalidAcceleratorQuantity = "InvalidAcceleratorQuantity"
	ReasonNoAcceleratorDemand        = "NoAcceleratorDemand"
	ReasonNotDivisible               = "NotDivisible"
	ReasonInvalidName                = "InvalidName"
	ReasonInvalidReplicas            = "InvalidReplicas"
	ReasonTooManyChildren            = "TooManyChildren"
	ReasonInvalidMinAvailable        = "InvalidMinAvailable"
	ReasonInvalidMaxDomains          = "InvalidMaxDomains"
	ReasonQueueNotAllowed            = "QueueNotAllowed"
	ReasonClusterNotAllowed          = "ClusterNotAllowed"
	// ReasonValid is the reason of a False SplitPolicyInvalid/SpecInvalid condition once fixed.
	ReasonValid = "Valid"
	// ReasonChildrenCompleted is the reason of Completed.
	ReasonChildrenCompleted = "ChildJobsCompleted"
	// ReasonChildrenFailed is the reason of Failed.
	ReasonChildrenFailed = "ChildJobsFailed"
)

// finished reports whether a Volcano Job phase is final for the HyperJob: Completed, Failed,
// Aborted or Terminated.
func finished(p batchv1alpha1.JobPhase) bool {
	switch p {
	case batchv1alpha1.Completed, batchv1alpha1.Failed, batchv1alpha1.Aborted, batchv1alpha1.Terminated:
		return true
	}
	return false
}

// recordedStates flattens the JobStates the status already holds (child name → state). The status is
// the controller's memory of children that finished and were then deleted (e.g. by a Volcano TTL):
// such a child is never recreated.
func recordedStates(st *trainingv1alpha1.HyperJobStatus) map[string]batchv1alpha1.JobState {
	out := map[string]batchv1alpha1.JobState{}
	for i := range st.ReplicatedJobsStatus {
		for name, s := range st.ReplicatedJobsStatus[i].JobStates {
			out[name] = s
		}
	}
	return out
}

// ComputeStatus is the status the HyperJob should have given the plan and the child Volcano Jobs that
// exist now (by name). It is pure. A finished HyperJob's status is frozen: only observedGeneration
// moves. The returned condition, when not nil, is a terminal or refusal condition that was newly set
// (for an Event).
func ComputeStatus(hj *trainingv1alpha1.HyperJob, plan *Plan, jobs map[string]*batchv1alpha1.Job) (trainingv1alpha1.HyperJobStatus, *metav1.Condition) {
	st := *hj.Status.DeepCopy()
	st.ObservedGeneration = hj.Generation
	if hyperjobstatus.IsFinished(&hj.Status) || plan == nil {
		return st, nil
	}
	var newly *metav1.Condition
	set := func(c metav1.Condition) {
		c.ObservedGeneration = hj.Generation
		prev := apimeta.FindStatusCondition(st.Conditions, c.Type)
		if apimeta.SetStatusCondition(&st.Conditions, c) && c.Status == metav1.ConditionTrue &&
			(prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != c.Reason) {
			cc := c
			newly = &cc
		}
	}
	clear := func(t string) {
		if c := apimeta.FindStatusCondition(st.Conditions, t); c != nil && c.Status != metav1.ConditionFalse {
			set(metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: ReasonValid, Message: "the spec can be honoured"})
		}
	}

	recorded := recordedStates(&hj.Status)
	fp, _ := readFinishedPods(hj) // an unreadable annotation counts as empty (the controller logs it)
	sum := func(rj string, names []string) trainingv1alpha1.ReplicatedJobStatus {
		return aggregate(hj.Name, rj, names, jobs, recorded, fp)
	}
	st.ReplicatedJobsStatus = nil
	if ref := plan.Refusal; ref != nil {
		set(metav1.Condition{Type: ref.Condition, Status: metav1.ConditionTrue, Reason: ref.Reason, Message: ref.Message})
		for _, t := range []string{ConditionSplitPolicyInvalid, ConditionSpecInvalid} {
			if t != ref.Condition {
				clear(t)
			}
		}
		// Nothing is changed while refused; report the children that exist, and keep the recorded
		// state of finished children that are gone (they must never be recreated once the refusal is
		// lifted).
		byRJ := map[string][]string{}
		for name, j := range jobs {
			rj := j.Labels[childReplicatedJobLabel]
			byRJ[rj] = append(byRJ[rj], name)
		}
		for i := range hj.Status.ReplicatedJobsStatus {
			rs := &hj.Status.ReplicatedJobsStatus[i]
			for name, s := range rs.JobStates {
				if _, exists := jobs[name]; !exists && finished(s.Phase) {
					byRJ[rs.Name] = append(byRJ[rs.Name], name)
				}
			}
		}
		for i := range hj.Spec.ReplicatedJobs {
			name := hj.Spec.ReplicatedJobs[i].Name
			st.ReplicatedJobsStatus = append(st.ReplicatedJobsStatus, sum(name, byRJ[name]))
		}
		n := int32(len(jobs))
		st.SplitCount = &n
		return st, newly
	}
	clear(ConditionSplitPolicyInvalid)
	setAutoCondition(&st, hj.Generation, plan)
	if t := plan.Tenancy; t != nil {
		set(metav1.Condition{Type: t.Condition, Status: metav1.ConditionTrue, Reason: t.Reason, Message: t.Message})
	} else {
		clear(ConditionSpecInvalid)
	}

	var completed, done int32
	for i := range hj.Spec.ReplicatedJobs {
		name := hj.Spec.ReplicatedJobs[i].Name
		rs := sum(name, plan.byReplicatedJob[name])
		for _, s := range rs.JobStates {
			if s.Phase == batchv1alpha1.Completed {
				completed++
			}
			if finished(s.Phase) {
				done++
			}
		}
		st.ReplicatedJobsStatus = append(st.ReplicatedJobsStatus, rs)
	}
	total := plan.SplitCount()
	st.SplitCount = &total
	if total > 0 {
		switch {
		case completed >= plan.MinAvailable:
			set(metav1.Condition{Type: ConditionCompleted, Status: metav1.ConditionTrue, Reason: ReasonChildrenCompleted,
				Message: fmt.Sprintf("%d of %d child jobs completed (minAvailable %d)", completed, total, plan.MinAvailable)})
		case done == total:
			set(metav1.Condition{Type: ConditionFailed, Status: metav1.ConditionTrue, Reason: ReasonChildrenFailed,
				Message: fmt.Sprintf("all %d child jobs finished but only %d completed, fewer than minAvailable %d; the others failed, were aborted or terminated",
					total, completed, plan.MinAvailable)})
		}
	}
	return st, newly
}

// aggregate builds one replicatedJob's status from its children: each existing child's state and
// pod counts; a missing child whose recorded state is finished keeps that state. A child whose
// final counts are frozen (fp, finalcounts.go) adds those, succeeded and failed, and nothing else:
// whatever it reports now, and whether it still exists.
func aggregate(hj, rj string, names []string, jobs map[string]*batchv1alpha1.Job, recorded map[string]batchv1alpha1.JobState, fp finishedPods) trainingv1alpha1.ReplicatedJobStatus {
	rs := trainingv1alpha1.ReplicatedJobStatus{Name: rj}
	for _, n := range names {
		j, ok := jobs[n]
		var state batchv1alpha1.JobState
		switch {
		case ok:
			state = j.Status.State
		case finished(recorded[n].Phase):
			state = recorded[n]
		default:
			continue
		}
		if rs.JobStates == nil {
			rs.JobStates = map[string]batchv1alpha1.JobState{}
		}
		rs.JobStates[n] = state
		if c, frozen := fp.get(hj, rj, n); frozen {
			rs.Succeeded += c[0]
			rs.Failed += c[1]
			continue
		}
		if !ok {
			continue
		}
		rs.Pending += j.Status.Pending
		rs.Running += j.Status.Running
		rs.Succeeded += j.Status.Succeeded
		rs.Failed += j.Status.Failed
		rs.Terminating += j.Status.Terminating
		rs.Unknown += j.Status.Unknown
	}
	return rs
}

// setAutoCondition writes the AutoSplit condition of a plan in mode auto: True with the decided
// split, False with the numbers while no split fits. Its Events come from the decision itself
// (autodecide.go), not from the status.
// waitingMessage is the AutoSplit condition's message, and the NoSplitFits Event's, for a refusal.
func waitingMessage(refusal string) string { return "waiting: " + refusal }

func setAutoCondition(st *trainingv1alpha1.HyperJobStatus, gen int64, plan *Plan) {
	var c metav1.Condition
	switch {
	case plan.AutoRefused != "":
		c = metav1.Condition{Type: ConditionAutoSplit, Status: metav1.ConditionFalse, Reason: ReasonAutoSplitRefused, Message: plan.AutoRefused}
	case plan.AutoDecided != nil:
		c = metav1.Condition{Type: ConditionAutoSplit, Status: metav1.ConditionTrue, Reason: ReasonAutoSplitDecided,
			Message: plan.AutoDecided.conditionMessage()}
	case plan.Auto != nil && plan.AutoWaiting != "":
		c = metav1.Condition{Type: ConditionAutoSplit, Status: metav1.ConditionFalse, Reason: ReasonNoSplitFits,
			Message: waitingMessage(plan.AutoWaiting)}
	default:
		return
	}
	c.ObservedGeneration = gen
	apimeta.SetStatusCondition(&st.Conditions, c)
}
