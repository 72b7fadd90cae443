package defaults

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

// jobSet builds a JobSet whose replicatedJobs have the given pod templates.
func jobSet(annotations map[string]string, ttl *int32, templates ...corev1.PodTemplateSpec) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "a", Annotations: annotations}}
	js.Spec.TTLSecondsAfterFinished = ttl
	for i, tmpl := range templates {
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1alpha2.ReplicatedJob{
			Name:     []string{"leader", "worker"}[i],
			Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}},
		})
	}
	return js
}

func podTemplate(annotations map[string]string, pcn, sched string, priority *int32) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
		Spec:       corev1.PodSpec{PriorityClassName: pcn, SchedulerName: sched, Priority: priority},
	}
}

func TestJobSet(t *testing.T) {
	qKey := "metadata.annotations[" + QueueNameAnnotation + "]"
	rj := func(i, rest string) string { return "spec.replicatedJobs[" + i + "].template.spec.template." + rest }
	q := map[string]string{QueueNameAnnotation: "team-a"}
	const all = "team-a/queue,priorityClassName,schedulerName,ttlSecondsAfterFinished,activeDeadlineSeconds;jobset:train/groupName"
	g := func(m map[string]string) map[string]string {
		out := map[string]string{GroupNameAnnotation: "train"}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	gKey := "metadata.annotations[" + GroupNameAnnotation + "]"
	lKey := "metadata.labels[" + hbv1.JobSetGangLabel + "]"
	// ganged is a template of the gang: it carries the PodGroup gate's label.
	ganged := func(tmpl corev1.PodTemplateSpec) corev1.PodTemplateSpec {
		tmpl.Labels = map[string]string{hbv1.JobSetGangLabel: "train"}
		return tmpl
	}

	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *jobsetv1alpha2.JobSet
		want *jobsetv1alpha2.JobSet
		res  wantResult
	}{{
		name: "defaults applied to the JobSet and every pod template",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   jobSet(nil, nil, podTemplate(nil, "", "", nil), podTemplate(nil, "", "", nil)),
		want: jobSet(map[string]string{QueueNameAnnotation: "team-a", hbv1.ActiveDeadlineSecondsAnnotation: "604800", hbv1.DefaultedByAnnotation: all},
			ptr.To[int32](86400),
			ganged(podTemplate(g(q), "batch-normal", "hyperbatch-scheduler", nil)), ganged(podTemplate(g(q), "batch-normal", "hyperbatch-scheduler", nil))),
		res: wantResult{Policy: "team-a", Fields: []string{qKey,
			rj("0", qKey), rj("0", "spec.priorityClassName"), rj("0", "spec.schedulerName"),
			rj("1", qKey), rj("1", "spec.priorityClassName"), rj("1", "spec.schedulerName"),
			rj("0", gKey), rj("0", lKey), rj("1", gKey), rj("1", lKey),
			"spec.ttlSecondsAfterFinished", "metadata.annotations[" + hbv1.ActiveDeadlineSecondsAnnotation + "]"}, DefaultedBy: all},
	}, {
		name: "the user's JobSet queue reaches templates; template values kept",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](0),
			podTemplate(map[string]string{QueueNameAnnotation: "other"}, "p", "s", nil),
			podTemplate(nil, "", "s", ptr.To[int32](7))),
		want: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5", hbv1.DefaultedByAnnotation: "jobset:train/queue,groupName"},
			ptr.To[int32](0),
			ganged(podTemplate(g(map[string]string{QueueNameAnnotation: "other"}), "p", "s", nil)),
			ganged(podTemplate(g(map[string]string{QueueNameAnnotation: "mine"}), "", "s", ptr.To[int32](7)))),
		res: wantResult{Policy: "team-a", Fields: []string{rj("1", qKey), rj("0", gKey), rj("0", lKey), rj("1", gKey), rj("1", lKey)}, DefaultedBy: "jobset:train/queue,groupName"},
	}, {
		name: "namespace annotation beats policy queue, on the JobSet and its templates",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in:   jobSet(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1), podTemplate(nil, "p", "s", nil)),
		want: jobSet(map[string]string{QueueNameAnnotation: "ml-queue", hbv1.ActiveDeadlineSecondsAnnotation: "5", hbv1.DefaultedByAnnotation: "namespace:ml/queue;jobset:train/groupName"},
			ptr.To[int32](1), ganged(podTemplate(g(map[string]string{QueueNameAnnotation: "ml-queue"}), "p", "s", nil))),
		res: wantResult{Policy: "team-a", Fields: []string{qKey, rj("0", qKey), rj("0", gKey), rj("0", lKey)}, DefaultedBy: "namespace:ml/queue;jobset:train/groupName"},
	}, {
		name: "a gang's own group name is kept; an opted-out JobSet gets none",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "mine", GroupNameAnnotation: "other-group"}, "p", "s", nil)),
		want: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "mine", GroupNameAnnotation: "other-group"}, "p", "s", nil)),
		res: wantResult{Policy: "team-a"},
	}, {
		name: "a user's group name that is the JobSet's own gets the gate's label",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "mine", GroupNameAnnotation: "train"}, "p", "s", nil)),
		want: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.ActiveDeadlineSecondsAnnotation: "5", hbv1.DefaultedByAnnotation: "jobset:train/groupName"}, ptr.To[int32](1),
			ganged(podTemplate(map[string]string{QueueNameAnnotation: "mine", GroupNameAnnotation: "train"}, "p", "s", nil))),
		res: wantResult{Policy: "team-a", Fields: []string{rj("0", lKey)}, DefaultedBy: "jobset:train/groupName"},
	}, {
		name: "opted out: no group name",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.GangAnnotation: "false", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "mine"}, "p", "hyperbatch-scheduler", nil)),
		want: jobSet(map[string]string{QueueNameAnnotation: "mine", hbv1.GangAnnotation: "false", hbv1.ActiveDeadlineSecondsAnnotation: "5"}, ptr.To[int32](1),
			podTemplate(map[string]string{QueueNameAnnotation: "mine"}, "p", "hyperbatch-scheduler", nil)),
		res: wantResult{Policy: "team-a"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b"},
		in:   jobSet(nil, nil, podTemplate(nil, "", "", nil)),
		want: jobSet(nil, nil, podTemplate(nil, "", "", nil)),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, JobSet(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*jobsetv1alpha2.JobSet).DeepCopy, func(js *jobsetv1alpha2.JobSet) Result { return JobSet(js, tc.ns, pols) })
		})
	}
}
