package hyperjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/hyperjobstatus"
	"github.com/hyperbatch/hyperbatch/internal/policyinputs"
)

// maxBatch caps how many writes of one kind run at once (see slowStart).
const maxBatch = 256

// syncResult is what syncVCJobAndPP saw and did, for the status.
type syncResult struct {
	// plan is nil when the HyperJob is finished (its status is frozen) or could not be planned.
	plan *Plan
	// jobs are the child Volcano Jobs controlled by the HyperJob after this pass, by name.
	jobs map[string]*batchv1alpha1.Job
	// staleCache: the cached HyperJob is older than the apiserver's; nothing was written.
	staleCache bool
	// waitFor > 0: expectations are not met yet (see expectations); nothing was written. It is the
	// time until they expire.
	waitFor time.Duration
	// autoRetry: the HyperJob waits for room for its auto split (autodecide.go).
	autoRetry bool
}

// syncVCJobAndPP makes the HyperJob's children match its plan:
//
//   - a missing child gets its PropagationPolicy first (so the Volcano Job is claimed by it, not by a
//     broader ClusterPropagationPolicy, the moment it exists), then its Volcano Job;
//   - a PropagationPolicy whose spec hash label differs, or whose fields we own drifted, is updated in
//     place by server-side apply;
//   - a Volcano Job whose template hash differs is deleted (foreground) and recreated — one child
//     at a time, and never a child that already finished;
//   - children no longer in the plan are deleted, the Volcano Job first and its PropagationPolicy once
//     the job is gone, so the job stays propagated while it is torn down;
//   - a finished HyperJob's children are never written again, and a missing child whose recorded
//     state is finished is not recreated.
func (r *Reconciler) syncVCJobAndPP(ctx context.Context, hj *trainingv1alpha1.HyperJob) (syncResult, error) {
	res := syncResult{}
	jobs, pps, err := r.listChildren(ctx, hj)
	if err != nil {
		return res, err
	}
	res.jobs = jobs
	// Deleted children are let go first: their release never waits for expectations (our own
	// deletes are expected to vanish) or a plan (see finalizer.go).
	releaseErr := r.releaseDeleted(ctx, hj, jobs, nil)
	ref := hyperJobRef{key: client.ObjectKeyFromObject(hj), uid: hj.UID}
	if ok, left := r.exp.satisfied(ref, jobs, pps); !ok {
		res.waitFor = left
		return res, releaseErr
	}
	if hyperjobstatus.IsFinished(&hj.Status) {
		// The terminal guard: no child is created, changed or recreated again. A PropagationPolicy
		// whose Volcano Job is gone goes with it (nothing will ever create that job again).
		return res, errors.Join(releaseErr, r.deleteOrphanPPs(ctx, hj, ref, jobs, pps))
	}
	inputs, err := policyinputs.Read(ctx, r.client, hj.Namespace)
	if err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return res, errors.Join(releaseErr, err)
	}
	ns, pols := inputs.Namespace, inputs.Policies
	plan, err := BuildPlan(hj, ns, pols)
	if err != nil {
		return res, errors.Join(releaseErr, err)
	}
	res.plan = plan
	if plan.Refusal != nil {
		return res, releaseErr
	}
	if plan.Auto != nil {
		err := r.syncAuto(ctx, hj, plan, &res)
		return res, errors.Join(releaseErr, err)
	}
	if taken, err := r.checkAutoRefused(ctx, hj, plan); err != nil || taken {
		// Taken back: the HyperJob's watch event brings the pass that decides again.
		res.plan = nil
		return res, errors.Join(releaseErr, err)
	}

	recorded := recordedStates(&hj.Status)
	gate, err := r.gate(ctx, hj, plan, recorded, jobs, pps)
	if err != nil {
		return res, errors.Join(releaseErr, err)
	}
	desired := make(map[string]bool, len(plan.children))
	var (
		applyPPs    []*child
		createJobs  []*child
		recreate    []*batchv1alpha1.Job
		terminating int
		upToDate    = map[string]int{} // replicatedJob → children with the current template
		orphanPPs   []*policyv1alpha1.PropagationPolicy
	)
	for i := range plan.children {
		c := &plan.children[i]
		desired[c.name] = true
		job := jobs[c.name]
		if s, ok := recorded[c.name]; job == nil && ok && finished(s.Phase) {
			// Finished, then deleted (by hand, a script, a Volcano TTL): its result stands, it is
			// never recreated, and its PropagationPolicy goes with it.
			if pp := pps[c.name]; pp != nil && pp.DeletionTimestamp == nil {
				orphanPPs = append(orphanPPs, pp)
			}
			continue
		}
		if pp := pps[c.name]; pp == nil {
			applyPPs = append(applyPPs, c)
		} else if pp.DeletionTimestamp == nil && (pp.Labels[hbv1.PPSpecHashLabel] != c.ppHash || ppDrifted(c.pp, pp)) {
			applyPPs = append(applyPPs, c)
		}
		switch {
		case job == nil:
			createJobs = append(createJobs, c)
		case job.DeletionTimestamp != nil:
			terminating++
		case job.Labels[hbv1.VCJobTemplateSpecHashLabel] != c.templateHash:
			if !finished(job.Status.State.Phase) {
				recreate = append(recreate, job)
			}
		default:
			upToDate[c.replicatedJob]++
		}
	}
	// A deleted finished child that left the plan is never recreated: let it go.
	if err := r.releaseDeleted(ctx, hj, jobs, desired); err != nil {
		releaseErr = errors.Join(releaseErr, err)
	}
	var staleJobs []*batchv1alpha1.Job
	for name, j := range jobs {
		if !desired[name] && j.DeletionTimestamp == nil {
			staleJobs = append(staleJobs, j)
		}
	}
	var stalePPs []*policyv1alpha1.PropagationPolicy
	for name, pp := range pps {
		if !desired[name] && jobs[name] == nil && pp.DeletionTimestamp == nil {
			stalePPs = append(stalePPs, pp)
		}
	}
	if plan.Tenancy != nil {
		// Nothing new in a queue or on clusters the policy does not allow; what exists is kept.
		applyPPs, createJobs, recreate = nil, nil, nil
	}
	// One child at a time: a template change deletes the next stale child only when no child is being
	// deleted and none is waiting to be created.
	var recreateNow *batchv1alpha1.Job
	rolloutStarts, rolloutSize := false, 0
	if len(recreate) > 0 && len(createJobs) == 0 && terminating == 0 {
		recreateNow = recreate[0]
		// The rollout of a replicatedJob starts when none of its children has the new template yet.
		rj := recreateNow.Labels[childReplicatedJobLabel]
		rolloutStarts = upToDate[rj] == 0
		for _, j := range recreate {
			if j.Labels[childReplicatedJobLabel] == rj {
				rolloutSize++
			}
		}
	}
	if len(applyPPs)+len(createJobs)+len(staleJobs)+len(stalePPs)+len(orphanPPs) == 0 && recreateNow == nil {
		return res, releaseErr
	}
	if ok, err := r.cacheIsCurrent(ctx, hj); err != nil || !ok {
		res.staleCache = err == nil
		return res, errors.Join(releaseErr, err)
	}

	errs := []error{releaseErr}
	p := newPass()
	defer p.report(ctx, r.childRecorder, hj)
	written := r.writePropagationPolicies(ctx, hj, ref, applyPPs, pps, p, &errs)
	if gate.releasing && len(written) == len(applyPPs) {
		r.recorder.Eventf(hj, corev1.EventTypeNormal, ReasonDispatchingChildren,
			"every child has a member cluster: dispatching all %d at once (%s)", len(gate.clusters), releaseMessage(gate.clusters))
	}
	var ready []*child
	for _, c := range createJobs {
		if pps[c.name] != nil || written[c.name] {
			ready = append(ready, c)
		}
	}
	for _, j := range r.createJobs(ctx, hj, ref, ready, ns, pols, p, &errs) {
		jobs[j.Name] = j
	}
	for _, j := range staleJobs {
		if r.deleteJob(ctx, ref, j, actDeletedJob, p, &errs) {
			delete(jobs, j.Name)
		}
	}
	for _, pp := range stalePPs {
		r.deletePP(ctx, ref, pp, actDeletedPP, p, &errs)
	}
	for _, pp := range orphanPPs {
		r.deletePP(ctx, ref, pp, actDeletedOrphanPP, p, &errs)
	}
	if recreateNow != nil {
		if r.deleteJob(ctx, ref, recreateNow, actRecreatedJob, p, &errs) && rolloutStarts {
			// Once per template change, from the HyperJob's own source (events.go).
			r.recorder.Eventf(hj, corev1.EventTypeNormal, ReasonRecreatingJob,
				"the template of replicatedJob %s changed: recreating its %d unfinished children one at a time (Volcano Jobs cannot be updated in place), starting with %s",
				recreateNow.Labels[childReplicatedJobLabel], rolloutSize, recreateNow.Name)
		}
	}
	return res, errors.Join(errs...)
}

// gate applies the all-or-nothing dispatch (dispatch.go) to the plan: until every child has a
// scheduled cluster, the children's PropagationPolicies are planned with dispatching suspended.
func (r *Reconciler) gate(ctx context.Context, hj *trainingv1alpha1.HyperJob, plan *Plan, recorded map[string]batchv1alpha1.JobState, jobs map[string]*batchv1alpha1.Job, pps map[string]*policyv1alpha1.PropagationPolicy) (dispatchDecision, error) {
	if !r.gateDispatch {
		return dispatchDecision{release: true}, nil
	}
	var rbs workv1alpha2.ResourceBindingList
	if err := r.client.List(ctx, &rbs, client.InNamespace(hj.Namespace)); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return dispatchDecision{}, fmt.Errorf("listing ResourceBindings: %w", err)
	}
	skip := map[string]bool{}
	for name, s := range recorded {
		if jobs[name] == nil && finished(s.Phase) {
			skip[name] = true
		}
	}
	d := decideDispatch(plan, skip, pps, bindingsByChild(rbs.Items))
	if !d.release {
		for i := range plan.children {
			suspend(&plan.children[i])
		}
		log.FromContext(ctx).V(1).Info("children held back until every one has a member cluster", "waiting", len(d.waiting))
	}
	return d, nil
}

// deleteOrphanPPs deletes, for a finished HyperJob, every PropagationPolicy whose Volcano Job is
// gone: the terminal guard never recreates that job, so the policy would otherwise stay until the
// HyperJob is deleted. The caller checked the expectations (a job this controller created is in
// the cache); the HyperJob is read from the apiserver first, as before any write to children.
func (r *Reconciler) deleteOrphanPPs(ctx context.Context, hj *trainingv1alpha1.HyperJob, ref hyperJobRef, jobs map[string]*batchv1alpha1.Job, pps map[string]*policyv1alpha1.PropagationPolicy) error {
	var orphans []*policyv1alpha1.PropagationPolicy
	for name, pp := range pps {
		if jobs[name] == nil && pp.DeletionTimestamp == nil {
			orphans = append(orphans, pp)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	if ok, err := r.cacheIsCurrent(ctx, hj); err != nil || !ok {
		return err // a stale view: the watch event of the newer HyperJob brings the next pass
	}
	var errs []error
	p := newPass()
	defer p.report(ctx, r.childRecorder, hj)
	for _, pp := range orphans {
		r.deletePP(ctx, ref, pp, actDeletedOrphanPP, p, &errs)
	}
	return errors.Join(errs...)
}

// listChildren returns the Volcano Jobs and PropagationPolicies the HyperJob controls, by name.
func (r *Reconciler) listChildren(ctx context.Context, hj *trainingv1alpha1.HyperJob) (map[string]*batchv1alpha1.Job, map[string]*policyv1alpha1.PropagationPolicy, error) {
	opts := []client.ListOption{client.InNamespace(hj.Namespace), client.MatchingFields{controllerUIDIndex: string(hj.UID)}}
	var jl batchv1alpha1.JobList
	if err := r.client.List(ctx, &jl, opts...); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, nil, fmt.Errorf("listing child Volcano Jobs: %w", err)
	}
	var pl policyv1alpha1.PropagationPolicyList
	if err := r.client.List(ctx, &pl, opts...); err != nil {
		reconcileErrors.WithLabelValues(opRead).Inc()
		return nil, nil, fmt.Errorf("listing child PropagationPolicies: %w", err)
	}
	jobs := make(map[string]*batchv1alpha1.Job, len(jl.Items))
	for i := range jl.Items {
		jobs[jl.Items[i].Name] = &jl.Items[i]
	}
	pps := make(map[string]*policyv1alpha1.PropagationPolicy, len(pl.Items))
	for i := range pl.Items {
		pps[pl.Items[i].Name] = &pl.Items[i]
	}
	return jobs, pps, nil
}

// ppDrifted reports whether a field of a PropagationPolicy that this controller sets differs from
// the desired value (someone edited it); the spec hash label alone cannot tell. Only those fields are
// compared: a field someone else added (a labelSelector, a weightPreference) is not ours to remove
// with apply, and comparing it would make every pass apply again.
func ppDrifted(want, have *policyv1alpha1.PropagationPolicy) bool {
	w, h := &want.Spec, &have.Spec
	clusterNames := func(p *policyv1alpha1.Placement) []string {
		if p.ClusterAffinity == nil {
			return nil
		}
		return p.ClusterAffinity.ClusterNames
	}
	scheduling := func(p *policyv1alpha1.Placement) (policyv1alpha1.ReplicaSchedulingType, policyv1alpha1.ReplicaDivisionPreference) {
		if p.ReplicaScheduling == nil {
			return "", ""
		}
		return p.ReplicaScheduling.ReplicaSchedulingType, p.ReplicaScheduling.ReplicaDivisionPreference
	}
	wt, wp := scheduling(&w.Placement)
	ht, hp := scheduling(&h.Placement)
	return w.PropagateDeps != h.PropagateDeps || wt != ht || wp != hp ||
		!apiequality.Semantic.DeepEqual(w.Suspension, h.Suspension) ||
		!apiequality.Semantic.DeepEqual(selectorsIn(want.Namespace, w.ResourceSelectors), selectorsIn(have.Namespace, h.ResourceSelectors)) ||
		!apiequality.Semantic.DeepEqual(clusterNames(&w.Placement), clusterNames(&h.Placement)) ||
		!apiequality.Semantic.DeepEqual(w.Placement.SpreadConstraints, h.Placement.SpreadConstraints)
}

// selectorsIn is a PropagationPolicy's resource selectors as Karmada's webhook stores them: one
// without a namespace selects in the policy's own namespace, and the webhook writes it there. Without
// this, every pass would see the stored namespace as drift and apply a change that changes nothing.
func selectorsIn(ns string, sels []policyv1alpha1.ResourceSelector) []policyv1alpha1.ResourceSelector {
	out := make([]policyv1alpha1.ResourceSelector, len(sels))
	for i, s := range sels {
		if s.Namespace == "" {
			s.Namespace = ns
		}
		out[i] = s
	}
	return out
}

// writePropagationPolicies creates the missing PropagationPolicies and updates the existing ones by
// server-side apply, and returns the names that succeeded.
//
// A new PropagationPolicy is created, never applied: Create fails on an object of the same name that
// exists already (say, made by someone while the cache lagged), where a forced apply would adopt it.
// An existing one of ours is updated by server-side apply with the field manager FieldOwner: the
// controller states the fields it owns, fields it stops setting are removed, and what others add
// (Karmada's labels such as the permanent-id, finalizers, fields defaulted by the CRD) is kept,
// without a read-modify-write cycle or a resourceVersion conflict. Before its first apply, the
// fields the Create recorded under FieldOwner (an Update entry) are handed to the Apply entry
// (csaupgrade), so a field the controller stops setting is removed, not left behind.
func (r *Reconciler) writePropagationPolicies(ctx context.Context, hj *trainingv1alpha1.HyperJob, ref hyperJobRef, cs []*child, have map[string]*policyv1alpha1.PropagationPolicy, p *pass, errs *[]error) map[string]bool {
	ok := make([]bool, len(cs))
	err := slowStart(len(cs), func(i int) error {
		c := cs[i]
		var err error
		if cur := have[c.name]; cur == nil {
			err = r.createPP(ctx, hj, c, p)
		} else {
			err = r.applyPP(ctx, hj, c, cur, p)
		}
		if err != nil {
			return err
		}
		r.exp.applied(ref, c.name, ppStateKey(c.pp))
		ok[i] = true // each goroutine writes its own index
		return nil
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	out := make(map[string]bool, len(cs))
	for i, c := range cs {
		if ok[i] {
			out[c.name] = true
		}
	}
	return out
}

func (r *Reconciler) createPP(ctx context.Context, hj *trainingv1alpha1.HyperJob, c *child, p *pass) error {
	created, err := r.createChild(ctx, hj, c.pp.DeepCopy(), &policyv1alpha1.PropagationPolicy{}, opApplyPP, "FailedCreatePropagationPolicy", p)
	if created {
		p.did(ctx, actCreatedPP, c.name)
	}
	return err
}

// createChild creates a child object (empty is a zero object of its type). On AlreadyExists it asks
// the apiserver, not the cache, which may not show the object yet, whose it is: its own (created by
// an earlier pass the cache has not caught up with) is no error, anyone else's is (checkForeign).
// It reports whether it created obj.
func (r *Reconciler) createChild(ctx context.Context, hj *trainingv1alpha1.HyperJob, obj, empty client.Object, op, failReason string, p *pass) (bool, error) {
	err := r.client.Create(ctx, obj)
	if err == nil {
		return true, nil
	}
	if apierrors.IsAlreadyExists(err) {
		return false, r.checkForeign(ctx, r.apiReader, hj, empty, obj.GetName(), p)
	}
	kind := kindOf(obj)
	reconcileErrors.WithLabelValues(op).Inc()
	p.failed(ctx, failReason, fmt.Sprintf("creating %s %s: %v", kind, obj.GetName(), err))
	return false, fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
}

// kindOf names a child's kind for messages.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*policyv1alpha1.PropagationPolicy); ok {
		return "PropagationPolicy"
	}
	return "Volcano Job"
}

func (r *Reconciler) applyPP(ctx context.Context, hj *trainingv1alpha1.HyperJob, c *child, cur *policyv1alpha1.PropagationPolicy, p *pass) error {
	if !metav1.IsControlledBy(cur, hj) {
		return r.checkForeign(ctx, r.client, hj, &policyv1alpha1.PropagationPolicy{}, c.name, p)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(cur, sets.New(FieldOwner), FieldOwner)
	if err != nil {
		return fmt.Errorf("handing PropagationPolicy %s's fields to server-side apply: %w", c.name, err)
	}
	// base is the resourceVersion the apply starts from: the cached one, or the one the hand-over
	// wrote.
	base := cur.ResourceVersion
	if patch != nil {
		handed := cur.DeepCopy()
		if err := r.client.Patch(ctx, handed, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			reconcileErrors.WithLabelValues(opApplyPP).Inc()
			p.failed(ctx, "FailedApplyPropagationPolicy", fmt.Sprintf("handing PropagationPolicy %s's fields to server-side apply: %v", c.name, err))
			return fmt.Errorf("handing PropagationPolicy %s's fields to server-side apply: %w", c.name, err)
		}
		base = handed.ResourceVersion
	}
	u, err := applyConfiguration(c.pp)
	if err != nil {
		return err
	}
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership); err != nil {
		reconcileErrors.WithLabelValues(opApplyPP).Inc()
		p.failed(ctx, "FailedApplyPropagationPolicy", fmt.Sprintf("applying PropagationPolicy %s: %v", c.name, err))
		return fmt.Errorf("applying PropagationPolicy %s: %w", c.name, err)
	}
	// Apply answers with the stored object: the same resourceVersion means the apply changed
	// nothing (the cache was behind, or a field differed only as stored), and nothing is reported.
	if u.GetResourceVersion() != base {
		p.did(ctx, actUpdatedPP, c.name)
	}
	return nil
}

// applyConfiguration turns a desired PropagationPolicy into an apply configuration holding exactly
// the fields the controller sets: encoding/json drops unset optional fields, and the two fields every
// typed object carries (metadata.creationTimestamp: null, an empty status) are removed.
func applyConfiguration(pp *policyv1alpha1.PropagationPolicy) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(pp)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// createJobs creates child Volcano Jobs and returns those created.
//
// Volcano Jobs are created, not applied: the controller never updates one (Volcano's webhook rejects
// nearly every spec change, so a changed template means delete and recreate), and Create's
// AlreadyExists is the guard against a duplicate or a name taken by someone else.
func (r *Reconciler) createJobs(ctx context.Context, hj *trainingv1alpha1.HyperJob, ref hyperJobRef, cs []*child, ns defaults.Namespace, pols *defaults.Policies, p *pass, errs *[]error) []*batchv1alpha1.Job {
	out := make([]*batchv1alpha1.Job, len(cs))
	err := slowStart(len(cs), func(i int) error {
		c := cs[i]
		job := desiredJob(hj, c, ns, pols)
		if created, err := r.createChild(ctx, hj, job, &batchv1alpha1.Job{}, opCreate, "FailedCreateJob", p); !created {
			return err
		}
		r.exp.created(ref, job.Name, job.UID)
		out[i] = job
		p.did(ctx, actCreatedJob, c.name)
		return nil
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	created := out[:0]
	for _, j := range out {
		if j != nil {
			created = append(created, j)
		}
	}
	return created
}

// checkForeign reads the object holding a child's name (through rd: the cache, or the apiserver
// when the cache may lag) and fails when it is not controlled by this HyperJob: such an object is
// never adopted or overwritten. An absent or own object is no error.
func (r *Reconciler) checkForeign(ctx context.Context, rd client.Reader, hj *trainingv1alpha1.HyperJob, obj client.Object, name string, p *pass) error {
	if err := rd.Get(ctx, types.NamespacedName{Namespace: hj.Namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // gone meanwhile: the next pass creates it
		}
		reconcileErrors.WithLabelValues(opRead).Inc()
		return fmt.Errorf("reading %s/%s: %w", hj.Namespace, name, err)
	}
	if metav1.IsControlledBy(obj, hj) {
		return nil
	}
	reconcileErrors.WithLabelValues(opConflict).Inc()
	kind := kindOf(obj)
	p.failed(ctx, "ChildNameTaken", fmt.Sprintf("%s %s exists and is not controlled by this HyperJob; it is left alone and the child is not created", kind, name))
	return fmt.Errorf("%w: %s %s/%s exists and is not controlled by HyperJob %s", errNameTaken, kind, hj.Namespace, name, hj.Name)
}

// deleteJob deletes a child Volcano Job in the foreground, guarded by its UID (a stale cache can
// never delete a newer child of the same name). Foreground keeps the job visible until its own
// dependents (PodGroup and pods, or Karmada's ResourceBinding and Works) are gone, so its
// replacement, which reuses the name, never meets the old job's objects. Reports success.
func (r *Reconciler) deleteJob(ctx context.Context, ref hyperJobRef, j *batchv1alpha1.Job, act int, p *pass, errs *[]error) bool {
	uid := j.UID
	// The controller deletes a child only when it is out of the plan or unfinished: it lets it go
	// itself, so the deletion completes without waiting for another pass.
	if holdsFinalizer(j) {
		removed, err := r.removeFinalizer(ctx, j)
		if err != nil {
			*errs = append(*errs, err)
		}
		if !removed {
			return false // changed meanwhile, or failed: the next pass decides again
		}
	}
	err := r.client.Delete(ctx, j, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if err == nil {
		r.exp.deleted(ref, j.Name, uid)
		p.did(ctx, act, j.Name)
		return true
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true // already gone, or replaced by a newer child
	}
	reconcileErrors.WithLabelValues(opDelete).Inc()
	p.failed(ctx, "FailedDeleteJob", fmt.Sprintf("deleting Volcano Job %s: %v", j.Name, err))
	*errs = append(*errs, fmt.Errorf("deleting Volcano Job %s: %w", j.Name, err))
	return false
}

func (r *Reconciler) deletePP(ctx context.Context, ref hyperJobRef, pp *policyv1alpha1.PropagationPolicy, act int, p *pass, errs *[]error) {
	uid := pp.UID
	err := r.client.Delete(ctx, pp, client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		r.exp.deletedPP(ref, pp.Name, uid)
		p.did(ctx, act, pp.Name)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
	default:
		reconcileErrors.WithLabelValues(opDeletePP).Inc()
		p.failed(ctx, "FailedDeletePropagationPolicy", fmt.Sprintf("deleting PropagationPolicy %s: %v", pp.Name, err))
		*errs = append(*errs, fmt.Errorf("deleting PropagationPolicy %s: %w", pp.Name, err))
	}
}

// slowStart calls fn for 0..n-1 in batches of 1, 2, 4, … (at most maxBatch) running concurrently,
// and stops after the first batch with a failure, like Kubernetes' Job and ReplicaSet controllers: a
// systematic error (quota, a rejecting webhook) costs a handful of calls, not n.
func slowStart(n int, fn func(i int) error) error {
	for start, size := 0, 1; start < n; size = min(2*size, maxBatch) {
		size = min(size, n-start)
		errCh := make(chan error, size)
		var wg sync.WaitGroup
		for i := start; i < start+size; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(i); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		close(errCh)
		var errs []error
		for err := range errCh {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			if rest := n - start - size; rest > 0 {
				errs = append(errs, fmt.Errorf("%d more children not attempted after these failures", rest))
			}
			return errors.Join(errs...)
		}
		start += size
	}
	return nil
}
