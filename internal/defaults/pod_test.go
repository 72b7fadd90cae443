package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func pod(annotations map[string]string, mutate func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "a", Annotations: annotations}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func TestPod(t *testing.T) {
	const qPath = "metadata.annotations[" + QueueNameAnnotation + "]"
	const modePath = "metadata.annotations[" + NetworkTopologyModeAnnotation + "]"
	const tierPath = "metadata.annotations[" + NetworkTopologyHighestTierAnnotation + "]"
	allFields := []string{qPath, "spec.priorityClassName", "spec.schedulerName", modePath, tierPath}

	tierName := policy("named-tier", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.Queue = "q"
		s.Defaults.NetworkTopology = &hbv1.NetworkTopology{HighestTierName: "spine"}
	})
	modeOnly := policy("mode-only", 0, func(s *hbv1.WorkloadPolicySpec) {
		s.Defaults.NetworkTopology = &hbv1.NetworkTopology{}
	})

	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *corev1.Pod
		want *corev1.Pod
		res  wantResult
	}{{
		name: "defaults applied; Priority plugin's stale priority cleared",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: pod(nil, func(s *corev1.PodSpec) {
			s.Priority = ptr.To[int32](0)
			s.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}),
		want: pod(map[string]string{
			QueueNameAnnotation:                  "team-a",
			NetworkTopologyModeAnnotation:        "hard",
			NetworkTopologyHighestTierAnnotation: "2",
			hbv1.DefaultedByAnnotation:           "team-a/queue,priorityClassName,schedulerName,networkTopology",
		}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName = "batch-normal", "hyperbatch-scheduler"
		}),
		res: wantResult{Policy: "team-a", Fields: allFields, DefaultedBy: "team-a/queue,priorityClassName,schedulerName,networkTopology"},
	}, {
		name: "user values kept",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: pod(map[string]string{QueueNameAnnotation: "mine", NetworkTopologyModeAnnotation: "soft"}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName, s.Priority = "high", "my-scheduler", ptr.To[int32](9)
		}),
		want: pod(map[string]string{QueueNameAnnotation: "mine", NetworkTopologyModeAnnotation: "soft"}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName, s.Priority = "high", "my-scheduler", ptr.To[int32](9)
		}),
		res: wantResult{Policy: "team-a"},
	}, {
		name: "apiserver-defaulted default-scheduler is unset when the policy names a scheduler",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: pod(map[string]string{QueueNameAnnotation: "mine", NetworkTopologyModeAnnotation: "soft"}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName = "high", corev1.DefaultSchedulerName
		}),
		want: pod(map[string]string{QueueNameAnnotation: "mine", NetworkTopologyModeAnnotation: "soft",
			hbv1.DefaultedByAnnotation: "team-a/schedulerName"}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName = "high", "hyperbatch-scheduler"
		}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.schedulerName"}, DefaultedBy: "team-a/schedulerName"},
	}, {
		name: "default-scheduler kept when the policy names no scheduler",
		pols: []hbv1.WorkloadPolicy{policy("no-sched", 0, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "q" })},
		ns:   nsA,
		in:   pod(nil, func(s *corev1.PodSpec) { s.SchedulerName = corev1.DefaultSchedulerName }),
		want: pod(map[string]string{QueueNameAnnotation: "q", hbv1.DefaultedByAnnotation: "no-sched/queue"}, func(s *corev1.PodSpec) {
			s.SchedulerName = corev1.DefaultSchedulerName
		}),
		res: wantResult{Policy: "no-sched", Fields: []string{qPath}, DefaultedBy: "no-sched/queue"},
	}, {
		name: "default-scheduler kept when the policy names default-scheduler itself",
		pols: []hbv1.WorkloadPolicy{policy("same-sched", 0, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.SchedulerName = corev1.DefaultSchedulerName })},
		ns:   nsA,
		in:   pod(nil, func(s *corev1.PodSpec) { s.SchedulerName = corev1.DefaultSchedulerName }),
		want: pod(nil, func(s *corev1.PodSpec) { s.SchedulerName = corev1.DefaultSchedulerName }),
		res:  wantResult{Policy: "same-sched"},
	}, {
		name: "namespace annotation beats policy queue",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in:   pod(map[string]string{NetworkTopologyHighestTierAnnotation: "1"}, func(s *corev1.PodSpec) { s.PriorityClassName, s.SchedulerName = "x", "y" }),
		want: pod(map[string]string{
			QueueNameAnnotation:                  "ml-queue",
			NetworkTopologyHighestTierAnnotation: "1",
			hbv1.DefaultedByAnnotation:           "namespace:ml/queue",
		}, func(s *corev1.PodSpec) { s.PriorityClassName, s.SchedulerName = "x", "y" }),
		res: wantResult{Policy: "team-a", Fields: []string{qPath}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "namespace annotation applies without a policy",
		ns:   Namespace{Name: "ml", Annotations: map[string]string{QueueNameAnnotation: " namespace/ batch "}},
		in:   pod(nil, nil),
		want: pod(map[string]string{QueueNameAnnotation: "namespace/batch", hbv1.DefaultedByAnnotation: "namespace:ml/queue"}, nil),
		res:  wantResult{Fields: []string{qPath}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "blank queue annotation is unset; history is merged",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in: pod(map[string]string{QueueNameAnnotation: " ", hbv1.DefaultedByAnnotation: "old/priorityClassName"}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName = "x", "y"
			s.Hostname = "untouched"
		}),
		want: pod(map[string]string{
			QueueNameAnnotation:                  "team-a",
			NetworkTopologyModeAnnotation:        "hard",
			NetworkTopologyHighestTierAnnotation: "2",
			hbv1.DefaultedByAnnotation:           "old/priorityClassName;team-a/queue,networkTopology",
		}, func(s *corev1.PodSpec) {
			s.PriorityClassName, s.SchedulerName = "x", "y"
			s.Hostname = "untouched"
		}),
		res: wantResult{Policy: "team-a", Fields: []string{qPath, modePath, tierPath}, DefaultedBy: "old/priorityClassName;team-a/queue,networkTopology"},
	}, {
		name: "highestTierName cannot be a pod annotation: no topology",
		pols: []hbv1.WorkloadPolicy{tierName},
		ns:   nsA,
		in:   pod(nil, nil),
		want: pod(map[string]string{QueueNameAnnotation: "q", hbv1.DefaultedByAnnotation: "named-tier/queue"}, nil),
		res:  wantResult{Policy: "named-tier", Fields: []string{qPath}, DefaultedBy: "named-tier/queue"},
	}, {
		name: "empty mode is written as hard, no tier annotation",
		pols: []hbv1.WorkloadPolicy{modeOnly},
		ns:   nsA,
		in:   pod(nil, nil),
		want: pod(map[string]string{NetworkTopologyModeAnnotation: "hard", hbv1.DefaultedByAnnotation: "mode-only/networkTopology"}, nil),
		res:  wantResult{Policy: "mode-only", Fields: []string{modePath}, DefaultedBy: "mode-only/networkTopology"},
	}, {
		name: "higher weight wins",
		pols: []hbv1.WorkloadPolicy{
			policy("a-low", 1, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "low" }),
			policy("z-high", 5, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "high" }),
		},
		ns:   nsA,
		in:   pod(nil, nil),
		want: pod(map[string]string{QueueNameAnnotation: "high", hbv1.DefaultedByAnnotation: "z-high/queue"}, nil),
		res:  wantResult{Policy: "z-high", Fields: []string{qPath}, DefaultedBy: "z-high/queue"},
	}, {
		name: "equal weight: lexically smallest name wins",
		pols: []hbv1.WorkloadPolicy{
			policy("beta", 3, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "b" }),
			policy("alpha", 3, func(s *hbv1.WorkloadPolicySpec) { s.Defaults.Queue = "a" }),
		},
		ns:   nsA,
		in:   pod(nil, nil),
		want: pod(map[string]string{QueueNameAnnotation: "a", hbv1.DefaultedByAnnotation: "alpha/queue"}, nil),
		res:  wantResult{Policy: "alpha", Fields: []string{qPath}, DefaultedBy: "alpha/queue"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b", Labels: map[string]string{"team": "b"}},
		in:   pod(nil, nil),
		want: pod(nil, nil),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, Pod(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*corev1.Pod).DeepCopy, func(p *corev1.Pod) Result { return Pod(p, tc.ns, pols) })
		})
	}
}

func TestPodNil(t *testing.T) {
	checkResult(t, Pod(nil, nsA, mustPolicies(t, teamA())), wantResult{})
}
