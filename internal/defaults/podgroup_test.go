package defaults

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
)

func podGroup(annotations map[string]string, spec schedulingv1beta1.PodGroupSpec) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "a", Annotations: annotations}, Spec: spec}
}

func TestPodGroup(t *testing.T) {
	tests := []struct {
		name string
		pols []hbv1.WorkloadPolicy
		ns   Namespace
		in   *schedulingv1beta1.PodGroup
		want *schedulingv1beta1.PodGroup
		res  wantResult
	}{{
		name: "defaults applied over the CRD's default queue",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsA,
		in:   podGroup(nil, schedulingv1beta1.PodGroupSpec{MinMember: 4, Queue: "default"}),
		want: podGroup(map[string]string{hbv1.DefaultedByAnnotation: "team-a/queue,priorityClassName,networkTopology"}, schedulingv1beta1.PodGroupSpec{
			MinMember: 4, Queue: "team-a", PriorityClassName: "batch-normal",
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)},
		}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.queue", "spec.priorityClassName", "spec.networkTopology"},
			DefaultedBy: "team-a/queue,priorityClassName,networkTopology"},
	}, {
		name: "user values kept",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in: podGroup(nil, schedulingv1beta1.PodGroupSpec{Queue: "namespace/x", PriorityClassName: "p",
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "soft"}}),
		want: podGroup(nil, schedulingv1beta1.PodGroupSpec{Queue: "namespace/x", PriorityClassName: "p",
			NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{Mode: "soft"}}),
		res: wantResult{Policy: "team-a"},
	}, {
		name: "namespace annotation beats policy queue",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   nsML,
		in:   podGroup(nil, schedulingv1beta1.PodGroupSpec{PriorityClassName: "p", NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{}}),
		want: podGroup(map[string]string{hbv1.DefaultedByAnnotation: "namespace:ml/queue"}, schedulingv1beta1.PodGroupSpec{
			Queue: "ml-queue", PriorityClassName: "p", NetworkTopology: &schedulingv1beta1.NetworkTopologySpec{}}),
		res: wantResult{Policy: "team-a", Fields: []string{"spec.queue"}, DefaultedBy: "namespace:ml/queue"},
	}, {
		name: "no matching policy: no change, empty Result",
		pols: []hbv1.WorkloadPolicy{teamA()},
		ns:   Namespace{Name: "b"},
		in:   podGroup(nil, schedulingv1beta1.PodGroupSpec{Queue: "default"}),
		want: podGroup(nil, schedulingv1beta1.PodGroupSpec{Queue: "default"}),
		res:  wantResult{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pols := mustPolicies(t, tc.pols...)
			got := tc.in.DeepCopy()
			checkResult(t, PodGroup(got, tc.ns, pols), tc.res)
			checkObject(t, got, tc.want)
			checkIdempotent(t, got, (*schedulingv1beta1.PodGroup).DeepCopy, func(pg *schedulingv1beta1.PodGroup) Result { return PodGroup(pg, tc.ns, pols) })
		})
	}
}
