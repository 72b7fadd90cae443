package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func jobOwnedPodGroup(job *batchv1alpha1.Job) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-" + string(job.UID), Namespace: job.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1alpha1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1, Queue: job.Spec.Queue,
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "hard"}}}
}

// The PodGroup of a Volcano Job follows the Job (read through the cache): the Job's "default" queue
// is kept in a namespace whose policy names team-a, and the Job's highestTierName is restored. A
// PodGroup whose Job is gone (or is another Job of the same name) is not defaulted on its own.
func TestVolcanoJobPodGroupFollowsJob(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "a", UID: "uid-1"}, Spec: batchv1alpha1.JobSpec{
		Queue: "default", NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: "hard", HighestTierName: "block"}}}
	// A policy without allowedQueues: Volcano's "default" queue is allowed, so the PodGroup is admitted.
	d := testDeps(t, openTeamA(), nsA, job)
	m := d.podGroupMutator()

	var out schedulingv1beta1.PodGroup
	resp := admit(t, m, request(t, KindPodGroup, admissionv1.Create, jobOwnedPodGroup(job), nil), &out)
	require.True(t, resp.Allowed)
	assert.Equal(t, "default", out.Spec.Queue, "moved away from its Job's queue")
	assert.Empty(t, out.Spec.PriorityClassName, "defaulted from the policy on its own")
	require.NotNil(t, out.Spec.NetworkTopology)
	assert.Equal(t, "block", out.Spec.NetworkTopology.HighestTierName)
	wantWarning(t, resp, "spec.networkTopology.highestTierName=block from Volcano Job train (its spec: the PodGroup follows its Job)")

	other := job.DeepCopy()
	other.UID = "uid-2" // a Job of the same name that is not the owner
	for name, pg := range map[string]*schedulingv1beta1.PodGroup{
		"owner gone":      jobOwnedPodGroup(&batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "a", UID: "x"}, Spec: job.Spec}),
		"other same name": jobOwnedPodGroup(other),
	} {
		t.Run(name, func(t *testing.T) {
			resp := m.Handle(t.Context(), request(t, KindPodGroup, admissionv1.Create, pg, nil))
			require.True(t, resp.Allowed)
			assert.Empty(t, patchOps(t, resp), "a Job's PodGroup was defaulted on its own")
		})
	}

	// A PodGroup of no Volcano Job still gets the policy's defaults.
	plain := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "a"}, Spec: schedulingv1beta1.PodGroupSpec{Queue: "default"}}
	resp = admit(t, m, request(t, KindPodGroup, admissionv1.Create, plain, nil), &out)
	assert.Equal(t, "team-a", out.Spec.Queue)
}

// An UPDATE that drops the highestTierName the PodGroup got from its Job gets it back; one that keeps
// it is not patched.
func TestVolcanoJobPodGroupUpdateCarriesTierName(t *testing.T) {
	job := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "a", UID: "uid-1"}, Spec: batchv1alpha1.JobSpec{
		Queue: "default", NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: "hard", HighestTierName: "block"}}}
	d := testDeps(t, openTeamA(), nsA, job)
	m := d.podGroupMutator()
	old := jobOwnedPodGroup(job)
	old.Spec.NetworkTopology.HighestTierName = "block"
	dropped := old.DeepCopy()
	dropped.Spec.MinMember = 2
	dropped.Spec.NetworkTopology.HighestTierName = ""
	var out schedulingv1beta1.PodGroup
	resp := admit(t, m, request(t, KindPodGroup, admissionv1.Update, dropped, old), &out)
	require.True(t, resp.Allowed, "%+v", resp.Result)
	assert.Equal(t, "block", out.Spec.NetworkTopology.HighestTierName)
	assert.Equal(t, int32(2), out.Spec.MinMember)

	kept := old.DeepCopy()
	kept.Spec.MinMember = 3
	resp = m.Handle(t.Context(), request(t, KindPodGroup, admissionv1.Update, kept, old))
	require.True(t, resp.Allowed)
	assert.Empty(t, patchOps(t, resp))
}

// openTeamA is teamA without allowedQueues.
func openTeamA() *hbv1.WorkloadPolicy {
	p := teamA()
	p.Spec.AllowedQueues = nil
	return p
}
