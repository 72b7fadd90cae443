package defaults

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func hyperJob(annotations map[string]string, templates ...batchv1alpha1.JobSpec) *trainingv1alpha1.HyperJob {
	hj := &trainingv1alpha1.HyperJob{ObjectMeta: metav1.ObjectMeta{Name: "hj", Namespace: "a", Annotations: annotations}}
	for i, spec := range templates {
		hj.Spec.ReplicatedJobs = append(hj.Spec.ReplicatedJobs, trainingv1alpha1.ReplicatedJob{
			Name: []string{"a", "b"}[i], Replicas: 2, TemplateSpec: spec,
		})
	}
	return hj
}

func TestHyperJob(t *testing.T) {
	const all = "team-a/queue,priorityClassName,schedulerName,networkTopology,ttlSecondsAfterFinished,activeDeadlineSeconds"
	tmpl := func(i string) []string {
		p := "spec.replicatedJobs[" + i + "].templateSpec."
		return []string{p + "queue", p + "priorityClassName", p + "schedulerName", p + "networkTopology"}
	}
	defaulted := batchv1alpha1.JobSpec{
		Queue: "team-a", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler",
		NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)},
	}
	user := batchv1alpha1.JobSpec{Queue: "q", PriorityClassName: "p", SchedulerName: "s",
		NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: "soft"}}
	lifecycle := map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "1", hbv1.ActiveDeadlineSecondsAnnotation: "2"}

	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *trainingv1alpha1.HyperJob
		want *trainingv1alpha1.HyperJob
		res  wantResult
	}{{
		name: "defaults applied to every template and the lifecycle annotations",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   hyperJob(nil, batchv1alpha1.JobSpec{}, batchv1alpha1.JobSpec{Queue: "default"}),
		want: hyperJob(map[string]string{
			hbv1.TTLSecondsAfterFinishedAnnotation: "86400", hbv1.ActiveDeadlineSecondsAnnotation: "604800", hbv1.DefaultedByAnnotation: all,
		}, defaulted, defaulted),
		res: wantResult{Policy: "team-a", Fields: append(append(tmpl("0"), tmpl("1")...),
			"metadata.annotations["+hbv1.TTLSecondsAfterFinishedAnnotation+"]",
			"metadata.annotations["+hbv1.ActiveDeadlineSecondsAnnotation+"]"), DefaultedBy: all},
	}, {
		name: "user values kept",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   hyperJob(lifecycle, user),
		want: hyperJob(lifecycle, user),
		res:  wantResult{Policy: "team-a"},
	}, {
		name: "namespace annotation beats policy queue",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: hyperJob(lifecycle, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = ""
			return s
		}()),
		want: hyperJob(map[string]string{hbv1.TTLSecondsAfterFinishedAnnotation: "1", hbv1.ActiveDeadlineSecondsAnnotation: "2",
			hbv1.DefaultedByAnnotation: "namespace:ml/queue"}, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = "ml-queue"
			return s
		}()),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.replicatedJobs[0].templateSpec.queue"}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b"},
		in:   hyperJob(nil, batchv1alpha1.JobSpec{}),
		want: hyperJob(nil, batchv1alpha1.JobSpec{}),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, HyperJob(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*trainingv1alpha1.HyperJob).DeepCopy, func(hj *trainingv1alpha1.HyperJob) Result { return HyperJob(hj, tc.ns, pols) })
		})
	}
}
