package podgroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// cpuLimitRange is a namespace whose LimitRange defaults a container's cpu request to cpu.
func cpuLimitRange(cpu string) Admission {
	return Admission{LimitRanges: []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "lr"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, DefaultRequest: rl("cpu", cpu)}}}}}}
}

// gangPod is a pod of replicatedJob rj of the JobSet "js" (uid js-uid) as admitted with cpu (and
// memory when not empty), created at second sec.
func gangPod(name, rj, cpu, memory string, sec int) *corev1.Pod {
	req := rl("cpu", cpu)
	if memory != "" {
		req = rl("cpu", cpu, "memory", memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: "js", jobsetv1alpha2.JobSetUIDKey: "js-uid", jobsetv1alpha2.ReplicatedJobNameKey: rj},
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+sec), 0))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{ctr("c", req, nil)}},
	}
}

func TestPriceFollowingPods(t *testing.T) {
	noRequests := corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}
	withMem := corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("memory", "64Mi"), nil)}}
	// 3 pods at once: one Job of parallelism 3.
	three := func() *jobsetv1alpha2.JobSet {
		js := jobset(nil, rjob("node", 1, ptr.To[int32](3), nil, noRequests))
		js.UID = "js-uid"
		return js
	}
	deleting := gangPod("d", "node", "100m", "", 0)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	succeeded := gangPod("s", "node", "100m", "", 0)
	succeeded.Status.Phase = corev1.PodSucceeded
	failed := gangPod("f", "node", "100m", "", 0)
	failed.Status.Phase = corev1.PodFailed
	stale := gangPod("old-incarnation", "node", "100m", "", 0)
	stale.Labels[jobsetv1alpha2.JobSetUIDKey] = "earlier-uid"
	other := gangPod("other", "node", "100m", "", 0)
	other.Labels[jobsetv1alpha2.JobSetNameKey] = "another"

	for _, tc := range []struct {
		name                         string
		js                           *jobsetv1alpha2.JobSet
		adm                          Admission
		pods                         []*corev1.Pod
		want, inputs                 corev1.ResourceList
		existing, missing, differing int
	}{
		{name: "no pod: the current inputs (a suspended or new gang)", js: three(), adm: cpuLimitRange("250m"),
			want: rl("cpu", "750m"), inputs: rl("cpu", "750m"), missing: 3},
		{name: "every pod admitted with the current inputs: re-priced", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{gangPod("a", "node", "250m", "", 0), gangPod("b", "node", "250m", "", 1), gangPod("c", "node", "250m", "", 2)},
			want:   rl("cpu", "750m"),
			inputs: rl("cpu", "750m"), existing: 3},
		{name: "every pod admitted with the old inputs: kept", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{gangPod("a", "node", "100m", "", 0), gangPod("b", "node", "100m", "", 1), gangPod("c", "node", "100m", "", 2)},
			want:   rl("cpu", "300m"),
			inputs: rl("cpu", "750m"), existing: 3, differing: 3},
		{name: "a mix (a resume racing the change): each pod's own request", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{gangPod("a", "node", "100m", "", 0), gangPod("b", "node", "250m", "", 1), gangPod("c", "node", "100m", "", 2)},
			want:   rl("cpu", "450m"),
			inputs: rl("cpu", "750m"), existing: 3, differing: 2},
		{name: "old pods and members not created yet: those at the current inputs", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{gangPod("a", "node", "100m", "", 0)},
			want:   rl("cpu", "600m"),
			inputs: rl("cpu", "750m"), existing: 1, missing: 2, differing: 1},
		{name: "a deleting, a finished and a failed pod ask nothing: their replacements take the current inputs", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{deleting, succeeded, failed, gangPod("a", "node", "100m", "", 3)},
			want:   rl("cpu", "600m"),
			inputs: rl("cpu", "750m"), existing: 1, missing: 2, differing: 1},
		{name: "pods of another JobSet or of an earlier one of the same name are not members", js: three(), adm: cpuLimitRange("250m"),
			pods:   []*corev1.Pod{stale, other, gangPod("a", "node", "250m", "", 0)},
			want:   rl("cpu", "750m"),
			inputs: rl("cpu", "750m"), existing: 1, missing: 2},
		{name: "more pods than members: the oldest", js: three(), adm: cpuLimitRange("250m"),
			pods: []*corev1.Pod{gangPod("d", "node", "250m", "", 9), gangPod("a", "node", "100m", "", 0), gangPod("b", "node", "100m", "", 1),
				gangPod("c", "node", "100m", "", 2)},
			want:   rl("cpu", "300m"),
			inputs: rl("cpu", "750m"), existing: 3, differing: 3},
		{name: "per replicatedJob: a leader with old inputs, workers with new ones, one worker missing",
			js: func() *jobsetv1alpha2.JobSet {
				js := jobset(nil, rjob("leader", 1, nil, nil, noRequests), rjob("worker", 3, nil, nil, withMem))
				js.UID = "js-uid"
				return js
			}(), adm: cpuLimitRange("1"),
			pods: []*corev1.Pod{gangPod("l", "leader", "500m", "", 0),
				gangPod("w0", "worker", "1", "64Mi", 0), gangPod("w1", "worker", "1", "64Mi", 1),
				gangPod("x", "gone", "7", "", 0)}, // a replicatedJob the JobSet no longer has
			want:   rl("cpu", "3500m", "memory", "192Mi"),
			inputs: rl("cpu", "4", "memory", "192Mi"), existing: 3, missing: 1, differing: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PriceFollowingPods(tc.js, tc.adm, tc.pods)
			require.NoError(t, err)
			assert.True(t, sameNonZero(tc.want, got.MinResources), "price %s, want %s", formatResources(&got.MinResources), formatResources(&tc.want))
			assert.True(t, sameNonZero(tc.inputs, got.FromInputs), "inputs' price %s, want %s", formatResources(&got.FromInputs), formatResources(&tc.inputs))
			assert.Equal(t, tc.existing, got.Existing, "existing")
			assert.Equal(t, tc.missing, got.Missing, "missing")
			assert.Equal(t, tc.differing, got.Differing, "differing")
			assert.Equal(t, tc.differing > 0, got.FollowsOldInputs())
		})
	}
}

// A pod's own effective request counts its overhead and the KEP-753 rule, so a pod admitted with the
// RuntimeClass overhead of the moment matches the template priced with it.
func TestPriceFollowingPodsCountsOverhead(t *testing.T) {
	js := jobset(nil, rjob("node", 2, nil, nil, corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Containers: []corev1.Container{ctr("c", rl("cpu", "1"), nil)}}))
	adm := Admission{RuntimeClasses: map[string]*nodev1.RuntimeClass{"kata": {Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m")}}}}
	admitted := func(name, overhead string) *corev1.Pod {
		p := gangPod(name, "node", "1", "", 0)
		p.Spec.RuntimeClassName = ptr.To("kata")
		p.Spec.Overhead = rl("cpu", overhead)
		return p
	}
	got, err := PriceFollowingPods(js, adm, []*corev1.Pod{admitted("a", "250m"), admitted("b", "250m")})
	require.NoError(t, err)
	assert.Equal(t, 0, got.Differing)
	assert.True(t, sameNonZero(rl("cpu", "2500m"), got.MinResources), formatResources(&got.MinResources))

	got, err = PriceFollowingPods(js, adm, []*corev1.Pod{admitted("a", "100m"), admitted("b", "250m")})
	require.NoError(t, err)
	assert.Equal(t, 1, got.Differing)
	assert.True(t, sameNonZero(rl("cpu", "2350m"), got.MinResources), formatResources(&got.MinResources))

	// An unknown RuntimeClass is the same error as MinResources's, naming the field.
	_, err = PriceFollowingPods(js, Admission{}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runtimeClassName")
}

// Only the pod events that can change a price enqueue the JobSet.
func TestPodChanges(t *testing.T) {
	pending := gangPod("a", "node", "1", "", 0)
	running := pending.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	done := pending.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	gone := pending.DeepCopy()
	gone.DeletionTimestamp = ptr.To(metav1.Now())
	assert.True(t, podChanges.Create(event.CreateEvent{Object: pending}))
	assert.True(t, podChanges.Delete(event.DeleteEvent{Object: pending}))
	assert.False(t, podChanges.Update(event.UpdateEvent{ObjectOld: pending, ObjectNew: running}), "a status update of an active pod")
	assert.True(t, podChanges.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: done}), "a pod that finished")
	assert.True(t, podChanges.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: gone}), "a pod being deleted")
	assert.Equal(t, []string{"js"}, indexPodJobSet(pending))
	assert.Nil(t, indexPodJobSet(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("x")}}))
}

// An in-place resize (pods/resize) changes an active pod's own effective request, and with it the
// gang's price: it enqueues the JobSet. A status update that leaves the requests alone does not.
func TestPodChangesResize(t *testing.T) {
	running := gangPod("a", "node", "1", "", 0)
	running.Status.Phase = corev1.PodRunning
	resized := running.DeepCopy()
	resized.Generation = 2
	resized.Spec.Containers[0].Resources.Requests = rl("cpu", "2")
	assert.True(t, podChanges.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: resized}), "a pod resized in place")

	sidecar := running.DeepCopy()
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	grown := sidecar.DeepCopy()
	grown.Spec.InitContainers[0].Resources.Requests = rl("cpu", "500m")
	assert.True(t, podChanges.Update(event.UpdateEvent{ObjectOld: sidecar, ObjectNew: grown}), "a sidecar resized in place")

	ready := running.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	assert.False(t, podChanges.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: ready}), "a status update with the same requests")

	// A pod of no JobSet costs no comparison of requests.
	bare, bareResized := running.DeepCopy(), resized.DeepCopy()
	delete(bare.Labels, jobsetv1alpha2.JobSetNameKey)
	delete(bareResized.Labels, jobsetv1alpha2.JobSetNameKey)
	assert.False(t, podChanges.Update(event.UpdateEvent{ObjectOld: bare, ObjectNew: bareResized}), "a pod of no JobSet")
}

// The events of a gang's pods within PodEventBatch make one request for its JobSet, after the
// batch, not one each at once; a pod of no JobSet enqueues nothing.
func TestPodEventsBatchPerJobSet(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	start := time.Now()
	for i := 0; i < 500; i++ {
		p := gangPod(fmt.Sprintf("p%d", i), "node", "1", "", 0)
		p.Namespace = "ns"
		podEvents.Create(context.Background(), event.CreateEvent{Object: p}, q)
		if i%2 == 0 {
			done := p.DeepCopy()
			done.Status.Phase = corev1.PodSucceeded
			podEvents.Update(context.Background(), event.UpdateEvent{ObjectOld: p, ObjectNew: done}, q)
		}
	}
	other := gangPod("o", "node", "1", "", 0)
	other.Namespace, other.Labels[jobsetv1alpha2.JobSetNameKey] = "ns", "other"
	podEvents.Delete(context.Background(), event.DeleteEvent{Object: other}, q)
	podEvents.Create(context.Background(), event.CreateEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bare"}}}, q)
	if time.Since(start) < PodEventBatch {
		assert.Equal(t, 0, q.Len(), "a pod event enqueued its JobSet before the batch ended")
	}
	require.Eventually(t, func() bool { return q.Len() == 2 }, 5*PodEventBatch, 10*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), PodEventBatch)
	var got []string
	for q.Len() > 0 {
		r, _ := q.Get()
		got = append(got, r.String())
		q.Done(r)
	}
	assert.ElementsMatch(t, []string{"ns/js", "ns/other"}, got)
}
