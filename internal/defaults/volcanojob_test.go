package defaults

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func vcjob(annotations map[string]string, spec batchv1alpha1.JobSpec) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a", Annotations: annotations}, Spec: spec}
}

func TestVolcanoJob(t *testing.T) {
	const all = "team-a/queue,priorityClassName,schedulerName,networkTopology,ttlSecondsAfterFinished,activeDeadlineSeconds"
	deadlinePath := "metadata.annotations[" + hbv1.ActiveDeadlineSecondsAnnotation + "]"
	defaulted := batchv1alpha1.JobSpec{
		Queue: "team-a", PriorityClassName: "batch-normal", SchedulerName: "hyperbatch-scheduler",
		NetworkTopology:         &batchv1alpha1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)},
		TTLSecondsAfterFinished: ptr.To[int32](86400),
		MinAvailable:            3,
	}
	user := batchv1alpha1.JobSpec{
		Queue: "mine", PriorityClassName: "high", SchedulerName: "volcano",
		NetworkTopology:         &batchv1alpha1.NetworkTopologySpec{Mode: "soft"},
		TTLSecondsAfterFinished: ptr.To[int32](0),
	}
	named := policy("named", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.NetworkTopology = &hbv1.NetworkTopology{Mode: hbv1.NetworkTopologySoft, HighestTierName: "spine"}
	})

	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *batchv1alpha1.Job
		want *batchv1alpha1.Job
		res  wantResult
	}{{
		name: "defaults applied",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   vcjob(nil, batchv1alpha1.JobSpec{MinAvailable: 3}),
		want: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "604800", hbv1.DefaultedByAnnotation: all}, defaulted),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.queue", "spec.priorityClassName", "spec.schedulerName",
			"spec.networkTopology", "spec.ttlSecondsAfterFinished", deadlinePath}, DefaultedBy: all},
	}, {
		name: "Volcano's default queue counts as unset",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   vcjob(nil, batchv1alpha1.JobSpec{Queue: "default", MinAvailable: 3}),
		want: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "604800", hbv1.DefaultedByAnnotation: all}, defaulted),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.queue", "spec.priorityClassName", "spec.schedulerName",
			"spec.networkTopology", "spec.ttlSecondsAfterFinished", deadlinePath}, DefaultedBy: all},
	}, {
		name: "user values kept (namespace/default is explicit)",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60"}, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = "namespace/default"
			return s
		}()),
		want: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60"}, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = "namespace/default"
			return s
		}()),
		res: wantResult{Policy: "team-a"},
	}, {
		name: "namespace annotation beats policy queue",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60"}, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = ""
			return s
		}()),
		want: vcjob(map[string]string{hbv1.ActiveDeadlineSecondsAnnotation: "60", hbv1.DefaultedByAnnotation: "namespace:ml/queue"}, func() batchv1alpha1.JobSpec {
			s := user
			s.Queue = "ml-queue"
			return s
		}()),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.queue"}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "tier name and soft mode converted",
		pols: []hbv1.WorkloadPolicy{named},
		ns:   nsA,
		in:   vcjob(nil, batchv1alpha1.JobSpec{}),
		want: vcjob(map[string]string{hbv1.DefaultedByAnnotation: "named/networkTopology"}, batchv1alpha1.JobSpec{
			NetworkTopology: &batchv1alpha1.NetworkTopologySpec{Mode: "soft", HighestTierName: "spine"},
		}),
		res: wantResult{Policy: "named", Fields: []string{"spec.networkTopology"}, DefaultedBy: "named/networkTopology"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b"},
		in:   vcjob(nil, batchv1alpha1.JobSpec{Queue: "default"}),
		want: vcjob(nil, batchv1alpha1.JobSpec{Queue: "default"}),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, VolcanoJob(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*batchv1alpha1.Job).DeepCopy, func(j *batchv1alpha1.Job) Result { return VolcanoJob(j, tc.ns, pols) })
		})
	}
}
