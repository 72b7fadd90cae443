package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

// queueStore is an informer store holding Volcano Queues, as Setup wires d.queues.
func queueStore(t *testing.T, queues ...*schedulingv1beta1.Queue) store {
	t.Helper()
	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, q := range queues {
		require.NoError(t, s.Add(q))
	}
	return s
}

func openQueue(name string) *schedulingv1beta1.Queue {
	return &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: schedulingv1beta1.QueueStatus{State: schedulingv1beta1.QueueStateOpen}}
}

// A CREATE that hyperbatch's validator then refuses gets its defaults but no "defaulted" warning:
// the warning would be printed beside the refusal, as if the object had been created.
func TestNoDefaultedWarningOnRefusedCreate(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	d.queues = queueStore(t, openQueue("gpu"), openQueue("team-a"))
	forbidden := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"},
		Spec: batchv1alpha1.JobSpec{Queue: "gpu", Tasks: oneTask()}}
	resp := d.volcanoJobMutator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, forbidden, nil))
	require.True(t, resp.Allowed)
	assert.NotEmpty(t, patchOps(t, resp), "the defaults are still patched in")
	assert.Empty(t, resp.Warnings, "a warning on a request hyperbatch refuses")
	wantDenied(t, d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, forbidden, nil)),
		http.StatusUnprocessableEntity, `queue "gpu" is not allowed`)

	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "a"}, Spec: trainingv1alpha1.HyperJobSpec{
		ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "w", Replicas: 1, TemplateSpec: batchv1alpha1.JobSpec{Queue: "gpu", Tasks: oneTask()}}}}}
	resp = d.hyperJobMutator().Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, hj, nil))
	require.True(t, resp.Allowed)
	assert.Empty(t, resp.Warnings, "a warning on a HyperJob hyperbatch refuses")

	// An admitted one still gets its warning.
	ok := forbidden.DeepCopy()
	ok.Spec.Queue = "team-a"
	resp = d.volcanoJobMutator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, ok, nil))
	wantWarning(t, resp, "hyperbatch: defaulted spec.priorityClassName=batch-normal")
}

// A Volcano Job that Volcano's own webhook refuses to create is left to it: hyperbatch's validator
// admits it unchecked (so Volcano's refusal is the one shown, whatever order the apiserver's
// parallel calls finish in) and its mutator prints no warning. Jobs Volcano admits are judged as
// before.
func TestVolcanoRefusalWins(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	d.queues = queueStore(t, openQueue("gpu"), openQueue("team-a"),
		&schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "closed"}, Status: schedulingv1beta1.QueueStatus{State: schedulingv1beta1.QueueStateClosed}})
	d.volcanoJobWebhook.Store(true)
	v, m := d.volcanoJobValidator(), d.volcanoJobMutator()
	job := func(edit func(*batchv1alpha1.Job)) *batchv1alpha1.Job {
		j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"},
			Spec: batchv1alpha1.JobSpec{Queue: "gpu", Tasks: oneTask()}}
		edit(j)
		return j
	}
	ttl := int32(-1)
	for name, j := range map[string]*batchv1alpha1.Job{
		"minAvailable above replicas": job(func(j *batchv1alpha1.Job) { j.Spec.MinAvailable = 5 }),
		"no tasks":                    job(func(j *batchv1alpha1.Job) { j.Spec.Tasks = nil }),
		"negative ttl":                job(func(j *batchv1alpha1.Job) { j.Spec.TTLSecondsAfterFinished = &ttl }),
		"duplicate task":              job(func(j *batchv1alpha1.Job) { j.Spec.Tasks = append(j.Spec.Tasks, oneTask()...) }),
		"bad task name":               job(func(j *batchv1alpha1.Job) { j.Spec.Tasks[0].Name = "W_1" }),
		"missing queue":               job(func(j *batchv1alpha1.Job) { j.Spec.Queue = "nope" }),
		"closed queue":                job(func(j *batchv1alpha1.Job) { j.Spec.Queue = "closed" }),
	} {
		t.Run(name, func(t *testing.T) {
			why, err := d.volcanoRefusal(context.Background(), j)
			require.NoError(t, err)
			assert.NotEmpty(t, why)
			resp := v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, j, nil))
			assert.True(t, resp.Allowed, "hyperbatch refused a Job Volcano refuses first: %v", resp.Result)
			resp = m.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, j, nil))
			assert.Empty(t, resp.Warnings)
		})
	}
	// Volcano admits it: hyperbatch's refusal stands, also on UPDATE, which is not deferred.
	plain := job(func(*batchv1alpha1.Job) {})
	why, err := d.volcanoRefusal(context.Background(), plain)
	require.NoError(t, err)
	assert.Empty(t, why)
	wantDenied(t, v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, plain, nil)),
		http.StatusUnprocessableEntity, `queue "gpu" is not allowed`)
	old := plain.DeepCopy()
	old.Spec.Queue = "team-a"
	noTasks := job(func(j *batchv1alpha1.Job) { j.Spec.Tasks = nil })
	wantDenied(t, v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Update, noTasks, old)),
		http.StatusUnprocessableEntity, `queue "gpu" is not allowed`)
}

// Without Volcano's job webhook registered nothing else refuses a Job, so hyperbatch judges every
// one; the ValidatingWebhookConfigurations tell whether it is registered.
func TestNoVolcanoWebhookNoDeferral(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	d.queues = queueStore(t, openQueue("gpu"))
	noTasks := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{Queue: "gpu"}}
	wantDenied(t, d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, noTasks, nil)),
		http.StatusUnprocessableEntity, `queue "gpu" is not allowed`)

	s := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	other := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hyperbatch-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "volcanojob.validate.hyperbatch.dev"}}}
	require.NoError(t, s.Add(other))
	assert.False(t, hasVolcanoJobWebhook(s))
	require.NoError(t, s.Add(&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "volcano-admission-service-jobs-validate"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: VolcanoJobWebhookName}}}))
	assert.True(t, hasVolcanoJobWebhook(s))
}

// A task's partitionPolicy that cannot become sub-groups (partitions × size is not its replicas) is
// refused on CREATE, naming the field; a consistent one, and any UPDATE, pass.
func TestVolcanoJobPartitionPolicyRefused(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	job := func(total, size int32) *batchv1alpha1.Job {
		return &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{Queue: "team-a",
			Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 8, PartitionPolicy: &batchv1alpha1.PartitionPolicySpec{TotalPartitions: total, PartitionSize: size}}}}}
	}
	wantDenied(t, d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job(3, 2), nil)),
		http.StatusUnprocessableEntity, "spec.tasks[0].partitionPolicy", "totalPartitions 3 × partitionSize 2 must equal the task's replicas 8")
	resp := d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job(2, 4), nil))
	assert.True(t, resp.Allowed, "%+v", resp.Result)
	resp = d.volcanoJobValidator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Update, job(3, 2), job(3, 2)))
	assert.True(t, resp.Allowed, "%+v", resp.Result)
}
