package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

const allTeamA = "team-a/queue,priorityClassName,schedulerName,networkTopology,ttlSecondsAfterFinished,activeDeadlineSeconds"

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.example/trainer:v1"}}}
}

func vcJob(ns, name string, mutate func(*batchv1alpha1.JobSpec)) *batchv1alpha1.Job {
	j := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: batchv1alpha1.JobSpec{
		MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: podSpec()}}}}}
	if mutate != nil {
		mutate(&j.Spec)
	}
	return j
}

func hyperJob(ns, name string, rjs ...trainingv1alpha1.ReplicatedJob) *trainingv1alpha1.HyperJob {
	return builders.MakeHyperJob(ns, name).ReplicatedJobs(rjs...).Obj()
}

func replicatedJob(name string, replicas int32) trainingv1alpha1.ReplicatedJob {
	return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas, TemplateSpec: batchv1alpha1.JobSpec{
		MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: podSpec()}}}}}
}

func jobSet(ns, name string) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: jobsetv1alpha2.JobSetSpec{
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpec()}}}}}}}
}

// A bare Pod in an opted-in namespace gets the policy's queue, class (with spec.priority from the
// PriorityClass), scheduler (default-scheduler counts as unset) and topology; a warning says so.
func TestPodDefaults(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "pods-a", map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	c, w := warningClient(t)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "pods-a"}, Spec: podSpec()}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if pod.Spec.SchedulerName != "hyperbatch-scheduler" || pod.Spec.PriorityClassName != "batch-normal" {
		t.Errorf("scheduler %q class %q", pod.Spec.SchedulerName, pod.Spec.PriorityClassName)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 1000 || pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("priority %v preemptionPolicy %v, want 1000 and PreemptLowerPriority from PriorityClass batch-normal", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
	want := map[string]string{
		defaults.QueueNameAnnotation:                  "team-a",
		defaults.NetworkTopologyModeAnnotation:        "hard",
		defaults.NetworkTopologyHighestTierAnnotation: "2",
		hbv1.DefaultedByAnnotation:                    "team-a/queue,priorityClassName,schedulerName,networkTopology",
	}
	for k, v := range want {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	wantContains(t, "warnings", strings.Join(w.Take(), "\n"),
		"hyperbatch: defaulted metadata.annotations[scheduling.volcano.sh/queue-name]=team-a, spec.priorityClassName=batch-normal, spec.schedulerName=hyperbatch-scheduler",
		"from WorkloadPolicy team-a", "spec.priority=1000, spec.preemptionPolicy=PreemptLowerPriority from PriorityClass batch-normal")

	// User values are kept; the user's own class gets its own priority from the Priority plugin.
	mine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "pods-a", Annotations: map[string]string{defaults.QueueNameAnnotation: "shared"}},
		Spec: podSpec()}
	mine.Spec.PriorityClassName, mine.Spec.SchedulerName = "batch-high", "my-scheduler"
	if err := c.Create(ctx, mine); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if mine.Spec.SchedulerName != "my-scheduler" || mine.Spec.PriorityClassName != "batch-high" || *mine.Spec.Priority != 5000 ||
		mine.Annotations[defaults.QueueNameAnnotation] != "shared" || mine.Annotations[hbv1.DefaultedByAnnotation] != "team-a/networkTopology" {
		t.Errorf("user values not kept: %+v %v", mine.Spec, mine.Annotations)
	}

	// Pods made by Volcano's job controller are left out by the objectSelector.
	vcPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vc-pod", Namespace: "pods-a", Labels: map[string]string{batchv1alpha1.JobNameKey: "j"}}, Spec: podSpec()}
	if err := c.Create(ctx, vcPod); err != nil {
		t.Fatal(err)
	}
	if vcPod.Annotations[hbv1.DefaultedByAnnotation] != "" || vcPod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("a Volcano job's pod reached the webhook: %v %q", vcPod.Annotations, vcPod.Spec.SchedulerName)
	}

	// A governed namespace that did not opt in: its Pods never reach the webhook.
	createNamespace(t, "pods-not-opted-in", map[string]string{"team": "a"}, nil)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "pods-not-opted-in"}, Spec: podSpec()}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if len(other.Annotations) != 0 || other.Spec.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("pod of a namespace without %s was mutated: %v", hbv1.PodWebhookLabel, other.Annotations)
	}

	// A queue outside allowedQueues is denied for a bare Pod too, by the mutating webhook: a Pod
	// CREATE makes one webhook call (docs/webhooks.md, "One call per bare Pod").
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "pods-a", Annotations: map[string]string{defaults.QueueNameAnnotation: "gpu"}}, Spec: podSpec()}
	err := c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	wantContains(t, "error", err.Error(), `admission webhook "pod.mutate.hyperbatch.dev" denied the request`, `queue "gpu" is not allowed in namespace "pods-a"`)
}

// A policy naming a PriorityClass that does not exist: the Pod is denied, naming both.
func TestPodMissingPriorityClass(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "pods-nopc", map[string]string{"team": "nopc", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	err := env.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "pods-nopc"}, Spec: podSpec()})
	if err == nil {
		t.Fatal("created a pod whose defaulted PriorityClass does not exist")
	}
	wantContains(t, "error", err.Error(), `admission webhook "pod.mutate.hyperbatch.dev" denied the request`,
		`spec.priorityClassName: Invalid value: "does-not-exist"`, `PriorityClass "does-not-exist" does not exist`, `WorkloadPolicy "missing-class"`)
}

// Every workload kind is defaulted through the real apiserver, with a warning and the
// defaulted-by annotation; the CRDs' own "default" queue counts as unset.
func TestWorkloadDefaults(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "work-a", map[string]string{"team": "a"}, nil)
	c, w := warningClient(t)

	job := vcJob("work-a", "vcjob", nil)
	if err := c.Create(ctx, job); err != nil {
		t.Fatalf("create Volcano Job: %v", err)
	}
	if job.Spec.Queue != "team-a" || job.Spec.PriorityClassName != "batch-normal" || job.Spec.SchedulerName != "hyperbatch-scheduler" ||
		job.Spec.NetworkTopology == nil || *job.Spec.NetworkTopology.HighestTierAllowed != 2 || *job.Spec.TTLSecondsAfterFinished != 86400 ||
		job.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] != "604800" || job.Annotations[hbv1.DefaultedByAnnotation] != allTeamA {
		t.Errorf("Volcano Job not defaulted: %+v %v", job.Spec, job.Annotations)
	}
	wantContains(t, "warning", strings.Join(w.Take(), "\n"), "hyperbatch: defaulted spec.queue=team-a, spec.priorityClassName=batch-normal, spec.schedulerName=hyperbatch-scheduler",
		`spec.networkTopology={"highestTierAllowed":2,"mode":"hard"}`, "spec.ttlSecondsAfterFinished=86400",
		"metadata.annotations[hyperbatch.dev/active-deadline-seconds]=604800 from WorkloadPolicy team-a")

	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "work-a"}, Spec: schedulingv1beta1.PodGroupSpec{MinMember: 2}}
	if err := c.Create(ctx, pg); err != nil {
		t.Fatalf("create PodGroup: %v", err)
	}
	if pg.Spec.Queue != "team-a" || pg.Spec.PriorityClassName != "batch-normal" || pg.Spec.NetworkTopology == nil ||
		pg.Annotations[hbv1.DefaultedByAnnotation] != "team-a/queue,priorityClassName,networkTopology" {
		t.Errorf("PodGroup not defaulted (the CRD's \"default\" queue must count as unset): %+v %v", pg.Spec, pg.Annotations)
	}

	js := jobSet("work-a", "js")
	if err := c.Create(ctx, js); err != nil {
		t.Fatalf("create JobSet: %v", err)
	}
	pt := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	if js.Annotations[defaults.QueueNameAnnotation] != "team-a" || pt.Annotations[defaults.QueueNameAnnotation] != "team-a" ||
		pt.Spec.PriorityClassName != "batch-normal" || pt.Spec.SchedulerName != "hyperbatch-scheduler" || *js.Spec.TTLSecondsAfterFinished != 86400 ||
		js.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] != "604800" || pt.Annotations[defaults.GroupNameAnnotation] != "js" {
		t.Errorf("JobSet not defaulted (a gang's pod templates name its PodGroup): %v %v %+v", js.Annotations, pt.Annotations, pt.Spec)
	}

	hj := hyperJob("work-a", "hj", replicatedJob("trainer", 2))
	if err := c.Create(ctx, hj); err != nil {
		t.Fatalf("create HyperJob: %v", err)
	}
	ts := hj.Spec.ReplicatedJobs[0].TemplateSpec
	if ts.Queue != "team-a" || ts.PriorityClassName != "batch-normal" || ts.SchedulerName != "hyperbatch-scheduler" || ts.NetworkTopology == nil ||
		hj.Annotations[hbv1.TTLSecondsAfterFinishedAnnotation] != "86400" || hj.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] != "604800" ||
		hj.Annotations[hbv1.DefaultedByAnnotation] != allTeamA {
		t.Errorf("HyperJob not defaulted: %+v %v", ts, hj.Annotations)
	}

	pp := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: "work-a"}, Spec: policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: "vcjob"}}}}
	if err := c.Create(ctx, pp); err != nil {
		t.Fatalf("create PropagationPolicy: %v", err)
	}
	pl := pp.Spec.Placement
	if pl.ClusterAffinity == nil || strings.Join(pl.ClusterAffinity.ClusterNames, ",") != "a,b" || pl.ReplicaScheduling == nil ||
		pl.ReplicaScheduling.ReplicaDivisionPreference != policyv1alpha1.ReplicaDivisionPreferenceAggregated ||
		len(pl.SpreadConstraints) != 1 || pl.SpreadConstraints[0].MaxGroups != 1 || !pp.Spec.PropagateDeps {
		t.Errorf("PropagationPolicy not defaulted: %+v", pl)
	}

	// A user's values are kept.
	own := vcJob("work-a", "own", func(s *batchv1alpha1.JobSpec) {
		s.Queue, s.PriorityClassName, s.SchedulerName, s.TTLSecondsAfterFinished = "shared", "batch-high", "volcano", ptr.To[int32](600)
	})
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if own.Spec.Queue != "shared" || own.Spec.PriorityClassName != "batch-high" || own.Spec.SchedulerName != "volcano" || *own.Spec.TTLSecondsAfterFinished != 600 ||
		own.Annotations[hbv1.DefaultedByAnnotation] != "team-a/networkTopology,activeDeadlineSeconds" {
		t.Errorf("user values not kept: %+v %v", own.Spec, own.Annotations)
	}
}

// Volcano's namespace annotation beats the policy's queue; a user's queue beats both.
func TestNamespaceAnnotationPrecedence(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "ml", map[string]string{"team": "a"}, map[string]string{defaults.QueueNameAnnotation: "shared"})
	c, w := warningClient(t)
	job := vcJob("ml", "from-ns", nil)
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if job.Spec.Queue != "shared" || !strings.HasPrefix(job.Annotations[hbv1.DefaultedByAnnotation], "namespace:ml/queue;team-a/priorityClassName") {
		t.Errorf("queue %q defaulted-by %q", job.Spec.Queue, job.Annotations[hbv1.DefaultedByAnnotation])
	}
	wantContains(t, "warning", strings.Join(w.Take(), "\n"), "spec.queue=shared from namespace ml (annotation scheduling.volcano.sh/queue-name)")
	user := vcJob("ml", "from-user", func(s *batchv1alpha1.JobSpec) { s.Queue = "team-a" })
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	if user.Spec.Queue != "team-a" {
		t.Errorf("user queue replaced with %q", user.Spec.Queue)
	}
}

// A queue outside the policy's allowedQueues is denied with the namespace, the policy and the list.
func TestAllowedQueueDenied(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "queues-a", map[string]string{"team": "a"}, nil)
	for _, o := range []client.Object{
		vcJob("queues-a", "gpu", func(s *batchv1alpha1.JobSpec) { s.Queue = "gpu" }),
		&schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: "queues-a"}, Spec: schedulingv1beta1.PodGroupSpec{Queue: "gpu"}},
		func() client.Object {
			h := hyperJob("queues-a", "gpu", replicatedJob("r", 1))
			h.Spec.ReplicatedJobs[0].TemplateSpec.Queue = "gpu"
			return h
		}(),
		func() client.Object {
			j := jobSet("queues-a", "gpu")
			j.Annotations = map[string]string{defaults.QueueNameAnnotation: "gpu"}
			return j
		}(),
	} {
		err := env.Client.Create(ctx, o)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%T: want an Invalid error, got %v", o, err)
			continue
		}
		wantContains(t, fmt.Sprintf("%T error", o), err.Error(), `queue "gpu" is not allowed in namespace "queues-a": WorkloadPolicy "team-a" allows only "team-a", "shared"`)
	}
	// The status names the field for clients that read causes.
	err := env.Client.Create(ctx, vcJob("queues-a", "gpu2", func(s *batchv1alpha1.JobSpec) { s.Queue = "gpu" }))
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Field != "spec.queue" {
		t.Errorf("status causes: %+v", err)
	}
}

// Lifecycle values: integers, bounds, immutability, and a warning for a short TTL.
func TestLifecycleValidation(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "life-a", map[string]string{"team": "a"}, nil)
	createNamespace(t, "life-short", map[string]string{"team": "short"}, nil)
	ttl, dl := hbv1.TTLSecondsAfterFinishedAnnotation, hbv1.ActiveDeadlineSecondsAnnotation

	for _, tc := range []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"not-int", map[string]string{ttl: "1d"}, `metadata.annotations[hyperbatch.dev/ttl-seconds-after-finished]: Invalid value: "1d": must be an integer`},
		{"neg-ttl", map[string]string{ttl: "-5"}, "must be greater than or equal to 0"},
		{"zero-dl", map[string]string{dl: "0"}, `metadata.annotations[hyperbatch.dev/active-deadline-seconds]: Invalid value: "0": must be greater than or equal to 1`},
	} {
		h := hyperJob("life-a", tc.name, replicatedJob("r", 1))
		h.Annotations = tc.ann
		err := env.Client.Create(ctx, h)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want Invalid, got %v", tc.name, err)
			continue
		}
		wantContains(t, tc.name, err.Error(), tc.want)
	}
	err := env.Client.Create(ctx, vcJob("life-a", "neg", func(s *batchv1alpha1.JobSpec) { s.TTLSecondsAfterFinished = ptr.To[int32](-1) }))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("negative spec.ttlSecondsAfterFinished: %v", err)
	}
	// The Job CRD generated from volcano.sh/apis carries minimum: 0, so the schema refuses it before
	// admission; the webhook's own check (unit-tested in webhook/) guards older installed schemas.
	wantContains(t, "error", err.Error(), "spec.ttlSecondsAfterFinished in body should be greater than or equal to 0")

	// Immutable once set.
	h := hyperJob("life-a", "fixed", replicatedJob("r", 1))
	h.Annotations = map[string]string{ttl: "3600", dl: "7200"}
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*trainingv1alpha1.HyperJob){
		func(h *trainingv1alpha1.HyperJob) { h.Annotations[ttl] = "60" },
		func(h *trainingv1alpha1.HyperJob) { h.Annotations[dl] = "1" },
	} {
		upd := h.DeepCopy()
		change(upd)
		err := env.Client.Update(ctx, upd)
		if !apierrors.IsInvalid(err) {
			t.Errorf("changing a lifecycle annotation: want Invalid, got %v", err)
			continue
		}
		wantContains(t, "error", err.Error(), "field is immutable once set")
	}
	j := vcJob("life-a", "fixed", nil)
	if err := env.Client.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	j.Spec.TTLSecondsAfterFinished = ptr.To[int32](5)
	if err := env.Client.Update(ctx, j); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ttlSecondsAfterFinished: Invalid value: 5: field is immutable once set (it is 86400)") {
		t.Errorf("changing spec.ttlSecondsAfterFinished: %v", err)
	}

	// A short TTL, from the policy here, is admitted with a warning.
	c, w := warningClient(t)
	short := vcJob("life-short", "short", nil)
	if err := c.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "warnings", strings.Join(w.Take(), "\n"), "spec.ttlSecondsAfterFinished=30 from WorkloadPolicy short-ttl",
		"hyperbatch: spec.ttlSecondsAfterFinished=30: the workload is deleted 30s after it finishes")
}

// HyperJob shape: names, uniqueness, replicas, and the length of the generated child names.
func TestHyperJobShape(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "shape-a", map[string]string{"team": "a"}, nil)
	long := strings.Repeat("l", 50)
	for _, tc := range []struct {
		obj  *trainingv1alpha1.HyperJob
		want []string
	}{
		{hyperJob("shape-a", long, replicatedJob("trainer-x", 12)), []string{`admission webhook "hyperjob.validate.hyperbatch.dev" denied the request`,
			`spec.replicatedJobs[0].name: Invalid value: "trainer-x"`, `the longest, "` + long + `-trainer-x-11", is 63 characters`}},
		{hyperJob("shape-a", long+"z", replicatedJob("trainer-x", 12)), []string{`the longest, "` + long + `z-trainer-x-11", is 64 characters, more than 63`}},
		{hyperJob("shape-a", "badname", replicatedJob("ok", 1), replicatedJob("Not_A_Label", 1)), []string{`spec.replicatedJobs[1].name: Invalid value: "Not_A_Label"`}},
		{hyperJob("shape-a", "negative", replicatedJob("r", -1)), []string{`spec.replicatedJobs[0].replicas: Invalid value: -1: must be greater than or equal to 1`}},
		// Duplicates are already refused by the CRD's listType=map, before the validating webhook.
		{hyperJob("shape-a", "dup", replicatedJob("r", 1), replicatedJob("r", 1)), []string{`spec.replicatedJobs[1]: Duplicate value`}},
	} {
		err := env.Client.Create(ctx, tc.obj)
		if len(tc.obj.Name) == 50 {
			// 50 + "-trainer-x-11" is exactly 63: allowed.
			if err != nil {
				t.Errorf("63-character child names denied: %v", err)
			}
			continue
		}
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: want Invalid, got %v", tc.obj.Name, err)
			continue
		}
		wantContains(t, tc.obj.Name, err.Error(), tc.want...)
	}
}

// Dry-run requests are defaulted and checked exactly like real ones and store nothing.
func TestDryRun(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "dry-a", map[string]string{"team": "a", hbv1.PodWebhookLabel: hbv1.PodWebhookLabelEnabled}, nil)
	c, w := warningClient(t)
	job := vcJob("dry-a", "dry", nil)
	if err := c.Create(ctx, job, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if job.Spec.Queue != "team-a" || job.Annotations[hbv1.DefaultedByAnnotation] != allTeamA {
		t.Errorf("dry-run object not defaulted: %+v %v", job.Spec, job.Annotations)
	}
	if len(w.Take()) == 0 {
		t.Error("no warning on a dry run")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dry", Namespace: "dry-a"}, Spec: podSpec()}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil || pod.Spec.SchedulerName != "hyperbatch-scheduler" || *pod.Spec.Priority != 1000 {
		t.Errorf("dry-run pod: %v %+v", err, pod.Spec)
	}
	if err := env.Client.Create(ctx, vcJob("dry-a", "dry-bad", func(s *batchv1alpha1.JobSpec) { s.Queue = "gpu" }), client.DryRunAll); !apierrors.IsInvalid(err) {
		t.Errorf("dry run of a forbidden queue: %v", err)
	}
	for _, o := range []client.Object{&batchv1alpha1.Job{}, &corev1.Pod{}} {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "dry-a", Name: "dry"}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T stored by a dry run: %v", o, err)
		}
	}
}

// kube-system and hyperbatch's namespace never reach the webhooks, although a policy governs them.
func TestSystemNamespacesNotAdmitted(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, hbwebhook.DefaultNamespace, nil, nil)
	for _, ns := range []string{"kube-system", hbwebhook.DefaultNamespace} {
		job := vcJob(ns, "untouched", func(s *batchv1alpha1.JobSpec) { s.Queue = "not-allowed-by-system-trap" })
		if err := env.Client.Create(ctx, job); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if len(job.Annotations) != 0 || job.Spec.PriorityClassName != "" || job.Spec.TTLSecondsAfterFinished != nil {
			t.Errorf("%s: Volcano Job was mutated: %+v %v", ns, job.Spec, job.Annotations)
		}
	}
}

// An update that drops defaults (a client-side apply replaces replicatedJobs wholesale) gets the
// old values back, silently: from the user's point of view nothing changed.
func TestUpdateKeepsDefaults(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "update-a", map[string]string{"team": "a"}, nil)
	js := jobSet("update-a", "js")
	if err := env.Client.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	c, w := warningClient(t)
	upd := js.DeepCopy()
	upd.Spec.ReplicatedJobs = jobSet("update-a", "js").Spec.ReplicatedJobs
	delete(upd.Annotations, hbv1.DefaultedByAnnotation)
	if err := c.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	pt := upd.Spec.ReplicatedJobs[0].Template.Spec.Template
	if pt.Annotations[defaults.QueueNameAnnotation] != "team-a" || pt.Spec.PriorityClassName != "batch-normal" ||
		upd.Annotations[hbv1.DefaultedByAnnotation] != js.Annotations[hbv1.DefaultedByAnnotation] {
		t.Errorf("defaults dropped by the update: %v %+v %v", pt.Annotations, pt.Spec, upd.Annotations)
	}
	if got := w.Take(); len(got) != 0 {
		t.Errorf("warnings on an update that changes nothing: %v", got)
	}
}

// A new or changed WorkloadPolicy reaches the webhook through its informer.
func TestPolicyChangeSeen(t *testing.T) {
	ctx, cancel := framework.Context(30 * time.Second)
	defer cancel()
	createNamespace(t, "late", map[string]string{"team": "late"}, nil)
	pol := &hbv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: hbv1.WorkloadPolicySpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "late"}},
		Defaults:          hbv1.PolicyDefaults{Queue: "late-1"}}}
	if err := env.Client.Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	queueOf := func(want string) {
		t.Helper()
		var last string
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			j := vcJob("late", "probe", nil)
			if err := env.Client.Create(ctx, j, client.DryRunAll); err != nil {
				return false, err
			}
			last = j.Spec.Queue
			return last == want, nil
		})
		if err != nil {
			t.Fatalf("queue %q, want %q: %v", last, want, err)
		}
	}
	queueOf("late-1")
	pol.Spec.Defaults.Queue = "late-2"
	if err := env.Client.Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	queueOf("late-2")
	if err := env.Client.Delete(ctx, pol); err != nil {
		t.Fatal(err)
	}
	// No policy, no namespace annotation: nothing to fill, so the Job CRD's schema default stays.
	queueOf("default")
}

// Malformed AdmissionReviews sent straight to the server get a 400 answer, not a crash.
func TestMalformedRequests(t *testing.T) {
	hc := webhookHTTPClient(t)
	post := func(path string, body []byte) (int, *admissionv1.AdmissionReview) {
		t.Helper()
		resp, err := hc.Post(webhookURL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }() // nothing to do about a failed close of a fully read body
		raw, _ := io.ReadAll(resp.Body)
		var review admissionv1.AdmissionReview
		_ = json.Unmarshal(raw, &review)
		return resp.StatusCode, &review
	}
	review := func(kind metav1.GroupVersionKind, obj string) []byte {
		b, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
			"uid": "u-1", "kind": kind, "resource": map[string]string{"group": kind.Group, "version": kind.Version, "resource": "x"},
			"operation": "CREATE", "namespace": "work-a", "object": json.RawMessage(obj), "userInfo": map[string]any{}}})
		return b
	}
	vcjob := metav1.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"}
	for name, tc := range map[string]struct {
		path string
		body []byte
	}{
		"garbage object":   {hbwebhook.MutateVolcanoJobPath, review(vcjob, `{"spec":{"queue":42,"tasks":"nope"}}`)},
		"not an object":    {hbwebhook.ValidateVolcanoJobPath, review(vcjob, `[1,2]`)},
		"wrong kind":       {hbwebhook.MutateHyperJobPath, review(vcjob, `{}`)},
		"not a review":     {hbwebhook.MutatePodPath, []byte(`this is not json`)},
		"empty review":     {hbwebhook.ValidatePodGroupPath, []byte(`{}`)},
		"pod garbage spec": {hbwebhook.MutatePodPath, review(metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, `{"spec":{"containers":{}}}`)},
	} {
		code, r := post(tc.path, tc.body)
		if code != http.StatusOK || r.Response == nil || r.Response.Allowed || r.Response.Result == nil || r.Response.Result.Code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, response %+v; want an AdmissionReview answering 400", name, code, r.Response)
		}
	}
	// The server is still there.
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	createNamespace(t, "after-garbage", map[string]string{"team": "a"}, nil)
	j := vcJob("after-garbage", "j", nil)
	if err := env.Client.Create(ctx, j, client.DryRunAll); err != nil || j.Spec.Queue != "team-a" {
		t.Errorf("webhook unhealthy after malformed requests: %v %q", err, j.Spec.Queue)
	}
}

// Requests are counted by webhook, kind, operation and result, and timed.
func TestMetrics(t *testing.T) {
	ctx, cancel := framework.Context(10 * time.Second)
	defer cancel()
	createNamespace(t, "metrics-a", map[string]string{"team": "a"}, nil)
	before := counter(t, "mutating", "patched")
	deniedBefore := counter(t, "validating", "denied")
	if err := env.Client.Create(ctx, vcJob("metrics-a", "m", nil)); err != nil {
		t.Fatal(err)
	}
	_ = env.Client.Create(ctx, vcJob("metrics-a", "m2", func(s *batchv1alpha1.JobSpec) { s.Queue = "gpu" }))
	if got := counter(t, "mutating", "patched"); got < before+1 {
		t.Errorf("patched counter %v, want at least %v", got, before+1)
	}
	if got := counter(t, "validating", "denied"); got < deniedBefore+1 {
		t.Errorf("denied counter %v, want at least %v", got, deniedBefore+1)
	}
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var samples uint64
	for _, f := range fams {
		if f.GetName() == "hyperbatch_webhook_admission_duration_seconds" {
			for _, m := range f.GetMetric() {
				samples += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if samples == 0 {
		t.Error("no latency observed")
	}
}

// counter returns the requests counter of VolcanoJob CREATE requests for webhook and result.
func counter(t *testing.T, webhook, result string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "hyperbatch_webhook_admission_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labels(m) == fmt.Sprintf("kind=VolcanoJob,operation=CREATE,result=%s,webhook=%s", result, webhook) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func certPool(pem []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in envtest's webhook CA data")
	}
	return p, nil
}
