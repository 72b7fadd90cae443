package podgroupstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// memberPod is a pending member of PodGroup g that the scheduler could not place yet, with a
// running-like container status and a Ready condition (what kubelet heartbeats touch).
func memberPod() *corev1.Pod {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{schedulingv1beta1.KubeGroupNameAnnotationKey: "g"}},
		Spec: corev1.PodSpec{SchedulerName: DefaultSchedulerName},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "gang ns/g waits", LastTransitionTime: t0},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastProbeTime: t0, LastTransitionTime: t0},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 0}},
		},
	}
}

func TestMemberPodChanges(t *testing.T) {
	later := metav1.NewTime(time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC))
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		// Every field the status computation (countPods, served) or the membership reads passes.
		{"phase Running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, true},
		{"phase Succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		{"phase Failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true},
		{"bound (nodeName)", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, true},
		{"deletion started", func(p *corev1.Pod) { p.DeletionTimestamp = &later }, true},
		{"PodScheduled message", func(p *corev1.Pod) { p.Status.Conditions[0].Message = "gang ns/g waits: 2 of 4" }, true},
		{"PodScheduled status", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionTrue }, true},
		{"PodScheduled transition time", func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = later }, true},
		{"PodScheduled appears", func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[1:] }, true},
		{"moved to another PodGroup", func(p *corev1.Pod) { p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey] = "h" }, true},
		{"left its PodGroup", func(p *corev1.Pod) { delete(p.Annotations, schedulingv1beta1.KubeGroupNameAnnotationKey) }, true},
		{"schedulerName", func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }, true},
		// Heartbeat-like updates change nothing the status reads.
		{"no change (resync)", func(*corev1.Pod) {}, false},
		{"container restart count", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 3 }, false},
		{"container ready", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = true }, false},
		{"Ready probe time", func(p *corev1.Pod) { p.Status.Conditions[1].LastProbeTime = later }, false},
		{"Ready flips", func(p *corev1.Pod) {
			p.Status.Conditions[1].Status, p.Status.Conditions[1].LastTransitionTime = corev1.ConditionTrue, later
		}, false},
		{"new unrelated condition", func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/Probe", Status: corev1.ConditionTrue, LastProbeTime: later})
		}, false},
		{"resize status (container resources)", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
		}, false},
		{"label", func(p *corev1.Pod) { p.Labels["app"] = "b" }, false},
		{"other annotation", func(p *corev1.Pod) { p.Annotations["example.com/x"] = "y" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := memberPod()
			n := old.DeepCopy()
			c.change(n)
			assert.Equal(t, c.want, memberPodChanges.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}), "old to new")
			if c.want {
				// The reverse change (e.g. a pod that joins a PodGroup, a condition that goes) too.
				assert.True(t, memberPodChanges.Update(event.UpdateEvent{ObjectOld: n, ObjectNew: old}), "new to old")
			}
		})
	}
}

func TestMemberPodChangesDropsPodsOfNoPodGroup(t *testing.T) {
	member := memberPod()
	assert.True(t, memberPodChanges.Create(event.CreateEvent{Object: member}))
	assert.True(t, memberPodChanges.Delete(event.DeleteEvent{Object: member}))

	bare := memberPod()
	delete(bare.Annotations, schedulingv1beta1.KubeGroupNameAnnotationKey)
	assert.False(t, memberPodChanges.Create(event.CreateEvent{Object: bare}), "create of a pod of no PodGroup")
	assert.False(t, memberPodChanges.Delete(event.DeleteEvent{Object: bare}), "delete of a pod of no PodGroup")
	finished := bare.DeepCopy()
	finished.Status.Phase, finished.Spec.NodeName = corev1.PodSucceeded, "n1"
	assert.False(t, memberPodChanges.Update(event.UpdateEvent{ObjectOld: bare, ObjectNew: finished}), "phase change of a pod of no PodGroup")
}
