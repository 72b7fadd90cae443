package podgroupstatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/hypertopology"
)

func gpu(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

func cand(name string, prio int32, age int, gpus int64) candidate {
	return candidate{key: types.NamespacedName{Namespace: "ns", Name: name}, priority: prio,
		created: time.Unix(1000, 0).Add(time.Duration(age) * time.Second), min: gpu(gpus), stated: gpu(gpus)}
}

func admitted(out map[types.NamespacedName]verdict) map[string]string {
	m := map[string]string{}
	for k, v := range out {
		if v.admit {
			m[k.Name] = "admit"
		} else {
			m[k.Name] = v.reason
		}
	}
	return m
}

func TestAdmitQueue(t *testing.T) {
	open := func(capability corev1.ResourceList, strategy schedulingv1beta1.DequeueStrategy) *schedulingv1beta1.Queue {
		return &schedulingv1beta1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q"},
			Spec:   schedulingv1beta1.QueueSpec{Capability: capability, DequeueStrategy: strategy},
			Status: schedulingv1beta1.QueueStatus{State: schedulingv1beta1.QueueStateOpen}}
	}
	closed := open(nil, "")
	closed.Status.State = schedulingv1beta1.QueueStateClosing
	unprocessed := open(nil, "")
	unprocessed.Status.State = ""

	for _, tc := range []struct {
		name     string
		q        *schedulingv1beta1.Queue
		reserved corev1.ResourceList
		cands    []candidate
		want     map[string]string
	}{
		{"missing queue", nil, nil, []candidate{cand("a", 0, 0, 1)}, map[string]string{"a": ReasonQueueNotFound}},
		{"closing queue", closed, nil, []candidate{cand("a", 0, 0, 1)}, map[string]string{"a": ReasonQueueClosed}},
		{"empty state counts as open", unprocessed, nil, []candidate{cand("a", 0, 0, 1)}, map[string]string{"a": "admit"}},
		{"no capability", open(nil, ""), gpu(100), []candidate{cand("a", 0, 0, 50), cand("b", 0, 1, 50)}, map[string]string{"a": "admit", "b": "admit"}},
		{"older first", open(gpu(8), ""), nil, []candidate{cand("young", 0, 5, 8), cand("old", 0, 1, 8)},
			map[string]string{"old": "admit", "young": ReasonQueueCapabilityExceeded}},
		{"priority before age", open(gpu(8), ""), nil, []candidate{cand("old", 0, 1, 8), cand("young", 10, 5, 8)},
			map[string]string{"young": "admit", "old": ReasonQueueCapabilityExceeded}},
		{"reserved counts", open(gpu(8), ""), gpu(4), []candidate{cand("a", 0, 1, 8), cand("b", 0, 2, 4)},
			map[string]string{"a": ReasonQueueCapabilityExceeded, "b": "admit"}},
		{"fifo stops at the head", open(gpu(8), schedulingv1beta1.DequeueStrategyFIFO), gpu(4), []candidate{cand("a", 0, 1, 8), cand("b", 0, 2, 4)},
			map[string]string{"a": ReasonQueueCapabilityExceeded, "b": ReasonQueueFIFO}},
		{"unnamed resources unlimited", open(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, ""), nil, []candidate{cand("a", 0, 1, 64)},
			map[string]string{"a": "admit"}},
		{"no minResources", open(gpu(1), ""), gpu(1), []candidate{{key: types.NamespacedName{Namespace: "ns", Name: "a"}}},
			map[string]string{"a": "admit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, admitted(admitQueue("q", tc.q, tc.reserved, tc.cands)))
		})
	}
}

func TestCapabilityMessageNamesNumbers(t *testing.T) {
	q := &schedulingv1beta1.Queue{Spec: schedulingv1beta1.QueueSpec{Capability: gpu(8)}}
	out := admitQueue("team-a", q, gpu(6), []candidate{cand("a", 0, 0, 4)})
	v := out[types.NamespacedName{Namespace: "ns", Name: "a"}]
	assert.False(t, v.admit)
	assert.Equal(t, `queue "team-a" capability exceeded: nvidia.com/gpu: Inqueue and Running gangs reserve 6, this gang's minResources 4, total 10 > capability 8`, v.message)
}

// A Volcano Job that sets its GPUs only in limits: its PodGroup's minResources has none, its price
// (its pods' requests) does, and the refusal says where the number comes from.
func TestCapabilityMessageNamesLimitOnlyRequests(t *testing.T) {
	q := &schedulingv1beta1.Queue{Spec: schedulingv1beta1.QueueSpec{Capability: gpu(16)}}
	c := cand("c", 0, 0, 8)
	c.stated = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	v := admitQueue("team-a", q, gpu(16), []candidate{c})[c.key]
	assert.False(t, v.admit)
	assert.Equal(t, `queue "team-a" capability exceeded: nvidia.com/gpu: Inqueue and Running gangs reserve 16, this gang's pods request 8 `+
		`(its minResources has 0: the Volcano Job's pod templates set the rest only in limits, which Kubernetes makes the request), total 24 > capability 16`, v.message)
}

func TestReasonMatchesPlugin(t *testing.T) {
	assert.Equal(t, hypertopology.ReasonGangWaiting, ReasonGangWaiting)
	assert.Equal(t, hypertopology.ReasonGangScheduled, ReasonGangScheduled)
}

func pod(phase corev1.PodPhase, node string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

func TestNextPhase(t *testing.T) {
	const (
		none      = schedulingv1beta1.PodGroupPhase("")
		pending   = schedulingv1beta1.PodGroupPending
		inqueue   = schedulingv1beta1.PodGroupInqueue
		running   = schedulingv1beta1.PodGroupRunning
		completed = schedulingv1beta1.PodGroupCompleted
	)
	for _, tc := range []struct {
		name  string
		cur   schedulingv1beta1.PodGroupPhase
		pods  []*corev1.Pod
		owned bool
		want  schedulingv1beta1.PodGroupPhase
		admit bool
	}{
		{"new gang needs enqueue", none, nil, false, none, true},
		{"pending stays for enqueue", pending, []*corev1.Pod{pod(corev1.PodPending, "")}, false, none, true},
		{"inqueue waits for pods", inqueue, []*corev1.Pod{pod(corev1.PodPending, "n")}, false, inqueue, false},
		{"running when minMember bound", inqueue, []*corev1.Pod{pod(corev1.PodPending, "n"), pod(corev1.PodRunning, "n")}, false, running, false},
		{"completed when all allocated succeeded", running, []*corev1.Pod{pod(corev1.PodSucceeded, "n"), pod(corev1.PodSucceeded, "n")}, false, completed, false},
		{"running while one still runs", running, []*corev1.Pod{pod(corev1.PodSucceeded, "n"), pod(corev1.PodRunning, "n")}, false, running, false},
		{"lost pods: back through enqueue", running, []*corev1.Pod{pod(corev1.PodRunning, "n")}, false, none, true},
		{"failed standalone gang completes", running, []*corev1.Pod{pod(corev1.PodFailed, "n"), pod(corev1.PodFailed, "n")}, false, completed, false},
		{"failed job-owned gang waits for its Job", running, []*corev1.Pod{pod(corev1.PodFailed, "n"), pod(corev1.PodFailed, "n")}, true, none, true},
		{"completed is final", completed, nil, false, completed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, admit := nextPhase(tc.cur, countPods(tc.pods), 2, tc.owned, nil)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.admit, admit)
		})
	}
}

// An unchanged gang yields a status equal to the stored one (no write on resync), including condition
// times.
func TestDesiredStatusStable(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := countPods([]*corev1.Pod{pod(corev1.PodRunning, "n"), pod(corev1.PodRunning, "n")})
	v := &verdict{reason: ReasonQueueClosed, message: "closed"}
	s1 := desiredStatus(schedulingv1beta1.PodGroupStatus{}, schedulingv1beta1.PodGroupPending, countPods(nil), 2, v, t0)
	s2 := desiredStatus(s1, schedulingv1beta1.PodGroupPending, countPods(nil), 2, v, t0.Add(time.Hour))
	assert.Equal(t, s1, s2)
	r1 := desiredStatus(s2, schedulingv1beta1.PodGroupRunning, c, 2, nil, t0.Add(2*time.Hour))
	r2 := desiredStatus(r1, schedulingv1beta1.PodGroupRunning, c, 2, nil, t0.Add(3*time.Hour))
	assert.Equal(t, r1, r2)
	assert.True(t, majorChange(s2, r1))
	assert.False(t, majorChange(r1, r2))
	u := findCondition(r1.Conditions, schedulingv1beta1.PodGroupUnschedulableType)
	assert.Equal(t, corev1.ConditionFalse, u.Status)
	assert.Equal(t, ReasonGangScheduled, u.Reason)
	assert.Equal(t, int32(2), r1.Running)
}
