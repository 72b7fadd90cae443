package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
)

var nsA = namespace("a", map[string]string{"team": "a"}, nil)

func TestPodCreate(t *testing.T) {
	d := testDeps(t, teamA(), nsA, batchNormal())
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}, Spec: corev1.PodSpec{
		SchedulerName: corev1.DefaultSchedulerName, Priority: ptr.To[int32](0), // as the apiserver and the Priority plugin leave it
		Containers: []corev1.Container{{Name: "c", Image: "i"}},
	}}
	var got corev1.Pod
	resp := admit(t, d.podMutator(), request(t, KindPod, admissionv1.Create, in, nil), &got)
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	if got.Spec.SchedulerName != "hyperbatch-scheduler" || got.Spec.PriorityClassName != "batch-normal" {
		t.Errorf("spec not defaulted: scheduler %q class %q", got.Spec.SchedulerName, got.Spec.PriorityClassName)
	}
	if got.Spec.Priority == nil || *got.Spec.Priority != 1000 || got.Spec.PreemptionPolicy == nil || *got.Spec.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("priority %v / preemption %v, want 1000 / PreemptLowerPriority from the PriorityClass", got.Spec.Priority, got.Spec.PreemptionPolicy)
	}
	if got.Annotations[defaults.QueueNameAnnotation] != "team-a" ||
		got.Annotations[hbv1.DefaultedByAnnotation] != "team-a/queue,priorityClassName,schedulerName,networkTopology" {
		t.Errorf("annotations %v", got.Annotations)
	}
	wantWarning(t, resp, "hyperbatch: defaulted metadata.annotations[scheduling.volcano.sh/queue-name]=team-a",
		"spec.priorityClassName=batch-normal", "spec.schedulerName=hyperbatch-scheduler", "from WorkloadPolicy team-a",
		"spec.priority=1000, spec.preemptionPolicy=PreemptLowerPriority from PriorityClass batch-normal")

	// UPDATE fills nothing new into a Pod created before the policy...
	resp = d.podMutator().Handle(context.Background(), request(t, KindPod, admissionv1.Update, in, in))
	if !resp.Allowed || len(patchOps(t, resp)) > 0 {
		t.Errorf("pod UPDATE: %+v", resp)
	}
	// ...but gives back what an update dropped: a server-side apply after a client-side one drops
	// spec.schedulerName, which the apiserver defaults to default-scheduler again.
	dropped := got.DeepCopy()
	dropped.Spec.SchedulerName = corev1.DefaultSchedulerName
	var updated corev1.Pod
	resp = admit(t, d.podMutator(), request(t, KindPod, admissionv1.Update, dropped, &got), &updated)
	if updated.Spec.SchedulerName != "hyperbatch-scheduler" || len(patchOps(t, resp)) != 1 {
		t.Errorf("pod UPDATE did not keep the scheduler: %q %v", updated.Spec.SchedulerName, patchOps(t, resp))
	}
}

func TestPodMissingPriorityClassDenied(t *testing.T) {
	d := testDeps(t, teamA(), nsA) // no PriorityClass batch-normal
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: "a"}}
	resp := d.podMutator().Handle(context.Background(), request(t, KindPod, admissionv1.Create, in, nil))
	wantDenied(t, resp, http.StatusUnprocessableEntity, `spec.priorityClassName: Invalid value: "batch-normal"`,
		`PriorityClass "batch-normal" does not exist`, `WorkloadPolicy "team-a"`, `namespace "a"`, `Pod "p-*"`)
}

func TestMalformedRequests(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a"}}
	all := d.handlers(AllKinds())
	for _, k := range AllKinds() {
		gvk := specOf(k).GVK
		for _, path := range []string{specOf(k).MutatePath, specOf(k).ValidatePath} {
			h, ok := all[path]
			if !ok {
				continue
			}
			base := request(t, KindPod, admissionv1.Create, pod, nil)
			base.Kind = metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
			garbage, notAnObject, empty, wrongKind, badOld := base, base, base, base, base
			garbage.Object.Raw = []byte(`{"metadata": [not json`)
			notAnObject.Object.Raw = []byte(`[1,2,3]`)
			empty.Object.Raw = nil
			wrongKind.Kind = metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
			badOld.Operation, badOld.OldObject.Raw = admissionv1.Update, []byte(`{"spec": 7`)
			if k == KindPod && strings.HasPrefix(path, "/mutate") {
				badOld = wrongKind // Pods are not mutated on UPDATE, so the old object is never read
			}
			for name, req := range map[string]admission.Request{"garbage": garbage, "not an object": notAnObject, "empty": empty,
				"wrong kind": wrongKind, "bad old object": badOld} {
				resp := h.Handle(context.Background(), req)
				if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
					t.Errorf("%s %s: want 400, got allowed=%v %+v", path, name, resp.Allowed, resp.Result)
				}
			}
		}
	}
}

func TestVolcanoJobCreateAndUpdate(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	in := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}, Spec: batchv1alpha1.JobSpec{
		Queue: "default", MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1}}}}
	var created batchv1alpha1.Job
	resp := admit(t, d.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Create, in, nil), &created)
	if created.Spec.Queue != "team-a" || created.Spec.TTLSecondsAfterFinished == nil || *created.Spec.TTLSecondsAfterFinished != 86400 ||
		created.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] != "604800" || created.Spec.NetworkTopology == nil {
		t.Fatalf("not defaulted: %+v %v", created.Spec, created.Annotations)
	}
	wantWarning(t, resp, "spec.queue=team-a", `spec.networkTopology={"highestTierAllowed":2,"mode":"hard"}`, "from WorkloadPolicy team-a")

	// An update that drops the defaults (kubectl replace with the original manifest) gets them back
	// from the old object, even after the policy changed.
	changed := teamA()
	changed.Spec.Defaults.Queue, changed.Spec.Defaults.PriorityClassName = "shared", "other"
	d2 := testDeps(t, changed, nsA)
	dropped := in.DeepCopy()
	dropped.Annotations = map[string]string{"user": "x"}
	var updated batchv1alpha1.Job
	resp = admit(t, d2.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Update, dropped, &created), &updated)
	if updated.Spec.Queue != "team-a" || updated.Spec.PriorityClassName != "batch-normal" ||
		updated.Annotations[hbv1.DefaultedByAnnotation] != created.Annotations[hbv1.DefaultedByAnnotation] ||
		updated.Annotations["user"] != "x" || updated.Annotations[hbv1.ActiveDeadlineSecondsAnnotation] != "604800" {
		t.Errorf("update did not keep the old defaults: %+v %v", updated.Spec, updated.Annotations)
	}
	if len(resp.Warnings) != 0 {
		t.Errorf("warnings on carry-over: %v", resp.Warnings)
	}

	// An object that predates the policy is not changed by an update.
	var untouched batchv1alpha1.Job
	resp = admit(t, d.volcanoJobMutator(), request(t, KindVolcanoJob, admissionv1.Update, in, in), &untouched)
	if len(patchOps(t, resp)) != 0 || untouched.Spec.Queue != "default" {
		t.Errorf("pre-policy object changed on update: %v", patchOps(t, resp))
	}
}

// A field the Go types do not know (a newer CRD) survives, and a parent the request lacks is created.
func TestPatchKeepsUnknownFieldsAndCreatesParents(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	req := request(t, KindPropagationPolicy, admissionv1.Create, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pp", Namespace: "a"}}, nil)
	req.Object.Raw = []byte(`{"apiVersion":"policy.karmada.io/v1alpha1","kind":"PropagationPolicy",` +
		`"metadata":{"name":"pp","namespace":"a"},"spec":{"resourceSelectors":[{"apiVersion":"v1","kind":"ConfigMap"}],"futureField":{"x":1}}}`)
	var got map[string]any
	resp := d.propagationPolicyMutator().Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	doc, _ := decodeJSONObject(req.Object.Raw)
	for _, op := range patchOps(t, resp) {
		if op.Operation == "remove" {
			t.Errorf("patch removes %s", op.Path)
		}
		if err := applyOp(doc, op.Operation, op.Path, op.Value); err != nil {
			t.Fatalf("patch %s %s: %v", op.Operation, op.Path, err)
		}
	}
	got = doc
	spec := got["spec"].(map[string]any)
	if _, ok := spec["futureField"]; !ok {
		t.Errorf("unknown field dropped: %v", spec)
	}
	placement, _ := spec["placement"].(map[string]any)
	if placement["clusterAffinity"] == nil || placement["spreadConstraints"] == nil || spec["propagateDeps"] != true {
		t.Errorf("placement not defaulted: %v", spec)
	}
}

func TestValidateQueues(t *testing.T) {
	d := testDeps(t, teamA(), nsA, namespace("free", nil, nil))
	job := func(ns, q string) *batchv1alpha1.Job {
		return &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns}, Spec: batchv1alpha1.JobSpec{Queue: q, Tasks: oneTask()}}
	}
	v := d.volcanoJobValidator()
	resp := v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job("a", "gpu"), nil))
	wantDenied(t, resp, http.StatusUnprocessableEntity, `Job.batch.volcano.sh "j" is invalid: spec.queue: Forbidden: queue "gpu" is not allowed in namespace "a": WorkloadPolicy "team-a" allows only "team-a", "shared"`)
	resp = v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, job("a", ""), nil))
	wantDenied(t, resp, http.StatusUnprocessableEntity, `queue "" (Volcano's "default" queue) is not allowed`)
	for _, ok := range []*batchv1alpha1.Job{job("a", "shared"), job("free", "anything")} {
		if resp := v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create, ok, nil)); !resp.Allowed {
			t.Errorf("%s/%q denied: %v", ok.Namespace, ok.Spec.Queue, resp.Result)
		}
	}
	// An unchanged queue is not judged again on UPDATE (the policy may have been tightened since).
	if resp := v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Update, job("a", "gpu"), job("a", "gpu"))); !resp.Allowed {
		t.Errorf("unchanged queue denied on update: %v", resp.Result)
	}
	// Deleting objects always pass.
	deleting := job("a", "other")
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	if resp := v.Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Update, deleting, job("a", "gpu"))); !resp.Allowed {
		t.Errorf("deleting object denied: %v", resp.Result)
	}

	// Pods: only a queue of their own, outside a PodGroup, is judged.
	pv := d.podValidator()
	pod := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", Annotations: ann}}
	}
	wantDenied(t, pv.Handle(context.Background(), request(t, KindPod, admissionv1.Create, pod(map[string]string{defaults.QueueNameAnnotation: "gpu"}), nil)),
		http.StatusUnprocessableEntity, "metadata.annotations[scheduling.volcano.sh/queue-name]: Forbidden")
	for _, ann := range []map[string]string{nil, {defaults.QueueNameAnnotation: "gpu", defaults.GroupNameAnnotation: "pg"}} {
		if resp := pv.Handle(context.Background(), request(t, KindPod, admissionv1.Create, pod(ann), nil)); !resp.Allowed {
			t.Errorf("pod %v denied: %v", ann, resp.Result)
		}
	}
}

func TestValidateLifecycle(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	hj := func(ann map[string]string) *trainingv1alpha1.HyperJob {
		return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "a", Annotations: ann},
			Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "r", Replicas: 1,
				TemplateSpec: batchv1alpha1.JobSpec{Queue: "team-a"}}}}}
	}
	ttl, dl := hbv1.TTLSecondsAfterFinishedAnnotation, hbv1.ActiveDeadlineSecondsAnnotation
	v := d.hyperJobValidator()
	cases := []struct {
		name     string
		obj, old *trainingv1alpha1.HyperJob
		deny     []string
		warn     string
	}{
		{"valid", hj(map[string]string{ttl: "3600", dl: "60"}), nil, nil, ""},
		{"not an integer", hj(map[string]string{ttl: "1h"}), nil, []string{`metadata.annotations[hyperbatch.dev/ttl-seconds-after-finished]: Invalid value: "1h": must be an integer`}, ""},
		{"negative ttl", hj(map[string]string{ttl: "-1"}), nil, []string{"must be greater than or equal to 0"}, ""},
		{"zero deadline", hj(map[string]string{dl: "0"}), nil, []string{`active-deadline-seconds]: Invalid value: "0": must be greater than or equal to 1`}, ""},
		{"short ttl warns", hj(map[string]string{ttl: "30"}), nil, nil, "is deleted 30s after it finishes"},
		{"ttl changed", hj(map[string]string{ttl: "7200"}), hj(map[string]string{ttl: "3600"}), []string{`field is immutable once set (it is "3600")`}, ""},
		{"deadline removed", hj(nil), hj(map[string]string{dl: "60"}), []string{`cannot be removed once set (it is "60")`}, ""},
		{"set once on update", hj(map[string]string{ttl: "100"}), hj(nil), nil, ""},
		{"immutable message names the key and the fix", hj(map[string]string{dl: "30"}), hj(map[string]string{dl: "60"}),
			[]string{`metadata.annotations[hyperbatch.dev/active-deadline-seconds]: Invalid value: "30": field is immutable once set (it is "60"): keep the old value, or delete the workload and create it again with the new one`}, ""},
		{"zero deadline says how to have none", hj(map[string]string{dl: "0"}), nil, []string{"omit the annotation for no deadline"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := admissionv1.Create
			var old *trainingv1alpha1.HyperJob
			if tc.old != nil {
				op, old = admissionv1.Update, tc.old
			}
			var req admission.Request
			if old != nil {
				req = request(t, KindHyperJob, op, tc.obj, old)
			} else {
				req = request(t, KindHyperJob, op, tc.obj, nil)
			}
			resp := v.Handle(context.Background(), req)
			if len(tc.deny) > 0 {
				wantDenied(t, resp, http.StatusUnprocessableEntity, tc.deny...)
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result.Message)
			}
			if tc.warn != "" {
				wantWarning(t, resp, tc.warn)
			}
		})
	}

	// Native TTL fields.
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "a", Annotations: map[string]string{defaults.QueueNameAnnotation: "team-a"}},
		Spec: jobsetv1alpha2.JobSetSpec{TTLSecondsAfterFinished: ptr.To[int32](-5)}}
	wantDenied(t, d.jobSetValidator().Handle(context.Background(), request(t, KindJobSet, admissionv1.Create, js, nil)),
		http.StatusUnprocessableEntity, "spec.ttlSecondsAfterFinished: Invalid value: -5")
	js2 := js.DeepCopy()
	js2.Spec.TTLSecondsAfterFinished = ptr.To[int32](10)
	js.Spec.TTLSecondsAfterFinished = ptr.To[int32](20)
	wantDenied(t, d.jobSetValidator().Handle(context.Background(), request(t, KindJobSet, admissionv1.Update, js2, js)),
		http.StatusUnprocessableEntity, "spec.ttlSecondsAfterFinished: Invalid value: 10: field is immutable once set (it is 20)")
}

func TestValidateHyperJobShape(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	rj := func(name string, replicas int32) trainingv1alpha1.ReplicatedJob {
		return trainingv1alpha1.ReplicatedJob{Name: name, Replicas: replicas, TemplateSpec: batchv1alpha1.JobSpec{Queue: "team-a"}}
	}
	hj := func(name string, rjs ...trainingv1alpha1.ReplicatedJob) *trainingv1alpha1.HyperJob {
		return &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "a"}, Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: rjs}}
	}
	long := strings.Repeat("x", 51)
	cases := []struct {
		obj  *trainingv1alpha1.HyperJob
		deny []string
	}{
		{hj("ok", rj("trainer", 2), rj("eval", 1)), nil},
		{hj(long, rj("trainer", 12)), nil}, // longest child xxx…-trainer-11 is 62 characters
		{hj("bad", rj("trainer", 1), rj("Bad_Name", 1)), []string{`spec.replicatedJobs[1].name: Invalid value: "Bad_Name": a DNS-1035 label`}},
		{hj("dup", rj("a", 1), rj("a", 1)), []string{`spec.replicatedJobs[1].name: Duplicate value: "a"`}},
		{hj("neg", rj("a", -1)), []string{`spec.replicatedJobs[0].replicas: Invalid value: -1: must be greater than or equal to 1`}},
		{hj(long, rj("trainer-x", 12)), []string{`spec.replicatedJobs[0].name: Invalid value: "trainer-x"`,
			`the longest, "` + long + `-trainer-x-11", is 64 characters, more than 63: shorten the HyperJob name (51 characters) or the replicatedJob name (9 characters) by 1`}},
	}
	for _, tc := range cases {
		resp := d.hyperJobValidator().Handle(context.Background(), request(t, KindHyperJob, admissionv1.Create, tc.obj, nil))
		if len(tc.deny) == 0 {
			if !resp.Allowed {
				t.Errorf("%s denied: %v", tc.obj.Name, resp.Result.Message)
			}
			continue
		}
		wantDenied(t, resp, http.StatusUnprocessableEntity, tc.deny...)
	}
}

func TestJobSetDefaultsAndUpdateCarryOver(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	tmpl := func() batchv1.JobTemplateSpec {
		return batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	}
	in := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: "a"}, Spec: jobsetv1alpha2.JobSetSpec{
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "w", Replicas: 1, Template: tmpl()}, {Name: "ps", Replicas: 1, Template: tmpl()}}}}
	var created jobsetv1alpha2.JobSet
	resp := admit(t, d.jobSetMutator(), request(t, KindJobSet, admissionv1.Create, in, nil), &created)
	// The group name is the JobSet's own name, and the warning says so (not its queue annotation);
	// the templates get the PodGroup gate's label too.
	wantWarning(t, resp, "annotations[scheduling.k8s.io/group-name]=js, ")
	wantWarning(t, resp, "labels[hyperbatch.dev/jobset-gang]=js from JobSet js (its name: the JobSet's PodGroup)")
	for _, rj := range created.Spec.ReplicatedJobs {
		pt := rj.Template.Spec.Template
		if pt.Labels[hbv1.JobSetGangLabel] != "js" {
			t.Fatalf("template %s has no %s label: %v", rj.Name, hbv1.JobSetGangLabel, pt.Labels)
		}
		if pt.Annotations[defaults.QueueNameAnnotation] != "team-a" || pt.Spec.PriorityClassName != "batch-normal" || pt.Spec.SchedulerName != "hyperbatch-scheduler" {
			t.Fatalf("template %s not defaulted: %v %+v", rj.Name, pt.Annotations, pt.Spec)
		}
	}
	// kubectl apply (client-side) replaces the whole replicatedJobs list with the manifest's, here
	// reordered; the old values come back element by element, matched by name.
	reapplied := created.DeepCopy()
	reapplied.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{in.Spec.ReplicatedJobs[1], in.Spec.ReplicatedJobs[0]}
	var updated jobsetv1alpha2.JobSet
	admit(t, d.jobSetMutator(), request(t, KindJobSet, admissionv1.Update, reapplied, &created), &updated)
	for _, rj := range updated.Spec.ReplicatedJobs {
		pt := rj.Template.Spec.Template
		if pt.Annotations[defaults.QueueNameAnnotation] != "team-a" || pt.Spec.PriorityClassName != "batch-normal" || pt.Labels[hbv1.JobSetGangLabel] != "js" {
			t.Errorf("template %s lost its defaults on update: %v %v %+v", rj.Name, pt.Annotations, pt.Labels, pt.Spec)
		}
	}
}

func TestPodGroupAndHyperJobDefaults(t *testing.T) {
	d := testDeps(t, teamA(), namespace("ml", map[string]string{"team": "a"}, map[string]string{defaults.QueueNameAnnotation: "shared"}))
	var pg schedulingv1beta1.PodGroup
	resp := admit(t, d.podGroupMutator(), request(t, KindPodGroup, admissionv1.Create, &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "ml"}, Spec: schedulingv1beta1.PodGroupSpec{Queue: "default"}}, nil), &pg)
	if pg.Spec.Queue != "shared" || pg.Annotations[hbv1.DefaultedByAnnotation] != "namespace:ml/queue;team-a/priorityClassName,networkTopology" {
		t.Errorf("podgroup: %+v %v", pg.Spec, pg.Annotations)
	}
	wantWarning(t, resp, "spec.queue=shared from namespace ml (annotation scheduling.volcano.sh/queue-name)", "spec.priorityClassName=batch-normal")

	var hj trainingv1alpha1.HyperJob
	admit(t, d.hyperJobMutator(), request(t, KindHyperJob, admissionv1.Create, &trainingv1alpha1.HyperJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "ml"}, Spec: trainingv1alpha1.HyperJobSpec{
			ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{Name: "r", Replicas: 1, TemplateSpec: batchv1alpha1.JobSpec{Queue: "default", PriorityClassName: "mine"}}}}}, nil), &hj)
	ts := hj.Spec.ReplicatedJobs[0].TemplateSpec
	if ts.Queue != "shared" || ts.PriorityClassName != "mine" || hj.Annotations[hbv1.TTLSecondsAfterFinishedAnnotation] != "86400" {
		t.Errorf("hyperjob: %+v %v", ts, hj.Annotations)
	}
}

func TestNamespaceNotInCache(t *testing.T) {
	d := testDeps(t, teamA())
	resp := d.volcanoJobMutator().Handle(context.Background(), request(t, KindVolcanoJob, admissionv1.Create,
		&batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "nowhere"}}, nil))
	wantDenied(t, resp, http.StatusInternalServerError, `namespace "nowhere" is not in hyperbatch's cache`)
}

func TestPolicyCacheRebuildsOnlyWhenStale(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	p1, err := d.policies.get(context.Background())
	if err != nil || p1.Len() != 1 {
		t.Fatalf("get: %v %v", p1, err)
	}
	p2, _ := d.policies.get(context.Background())
	if p1 != p2 {
		t.Error("rebuilt without an event")
	}
	d.policies.invalidate()
	if p3, _ := d.policies.get(context.Background()); p3 == p1 {
		t.Error("not rebuilt after an event")
	}
}

func TestDryRunIsIdentical(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	in := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a"}}
	req := request(t, KindVolcanoJob, admissionv1.Create, in, nil)
	dry := req
	dry.DryRun = ptr.To(true)
	a, b := d.volcanoJobMutator().Handle(context.Background(), req), d.volcanoJobMutator().Handle(context.Background(), dry)
	if len(patchOps(t, a)) == 0 || len(patchOps(t, a)) != len(patchOps(t, b)) || strings.Join(a.Warnings, "") != strings.Join(b.Warnings, "") {
		t.Errorf("dry run differs: %v vs %v", patchOps(t, a), patchOps(t, b))
	}
}

func TestInvalidIsAnInvalidStatus(t *testing.T) {
	resp := invalid(specOf(KindPodGroup).GVK, "pg", nil)
	err := &apierrors.StatusError{ErrStatus: *resp.Result}
	if !apierrors.IsInvalid(err) {
		t.Errorf("not Invalid: %v", err)
	}
}

func TestPolicyCacheConcurrent(t *testing.T) {
	d := testDeps(t, teamA(), nsA)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			d.policies.invalidate()
		}
	}()
	for i := 0; i < 200; i++ {
		if p, err := d.policies.get(context.Background()); err != nil || p.Len() != 1 {
			t.Fatalf("get: %v %v", p, err)
		}
	}
	<-done
}

// TestWarningNamesOnlyThisRequestsSources: the warning is built from the engine's Fills, so a
// defaulted-by history on the object (here a copied manifest) is kept in the annotation but never
// named as a source in the warning.
func TestWarningNamesOnlyThisRequestsSources(t *testing.T) {
	d := testDeps(t, teamA(), namespace("ml", map[string]string{"team": "a"}, map[string]string{defaults.QueueNameAnnotation: "shared"}), batchNormal())
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml",
		Annotations: map[string]string{hbv1.DefaultedByAnnotation: "old/queue,schedulerName"}}}
	var got corev1.Pod
	resp := admit(t, d.podMutator(), request(t, KindPod, admissionv1.Create, in, nil), &got)
	require.True(t, resp.Allowed, "denied: %+v", resp.Result)
	assert.Equal(t, "old/queue,schedulerName;namespace:ml/queue;team-a/priorityClassName,schedulerName,networkTopology",
		got.Annotations[hbv1.DefaultedByAnnotation])
	wantWarning(t, resp, "hyperbatch: defaulted metadata.annotations[scheduling.volcano.sh/queue-name]=shared from namespace ml",
		"spec.priorityClassName=batch-normal, spec.schedulerName=hyperbatch-scheduler")
	for _, w := range resp.Warnings {
		assert.NotContains(t, w, "old", "the history's source is not this request's")
	}
}
