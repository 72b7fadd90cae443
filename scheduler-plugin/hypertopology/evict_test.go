package hypertopology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/scheduler-plugin/gang"
)

// A domain's victims are evicted together, at most evictionConcurrency at a time (issue 38: one at a
// time, 8 victims took about 8 s and the preemptor waited for the last). Each eviction here waits
// until evictionConcurrency are in flight (or 300 ms): one at a time, 40 victims would take 12 s and
// never have two in flight.
func TestEvictVictimsConcurrently(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	full := make(chan struct{})
	evicted := sets.New[string]()
	gate := func(v *corev1.Pod) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == evictionConcurrency {
			select {
			case <-full:
			default:
				close(full)
			}
		}
		evicted.Insert(v.Name)
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(300 * time.Millisecond):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	var victims []*corev1.Pod
	for i := 0; i < 40; i++ {
		victims = append(victims, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("v%02d", i), UID: types.UID(fmt.Sprintf("uid-v%02d", i))}})
	}
	start := time.Now()
	forEachBounded(victims, evictionConcurrency, gate)
	assert.Equal(t, evictionConcurrency, most, "victims evicted together, bounded")
	assert.Len(t, evicted, len(victims), "every victim evicted once")
	assert.Less(t, time.Since(start), 5*time.Second, "not one after another")

	// Each eviction: the DisruptionTarget condition, the delete with the UID precondition, the Event.
	cs := fake.NewClientset(victims[0], victims[1])
	rec := &captureRecorder{}
	evictVictims(cs, rec, klog.Background(), pod("p", "g", 1000, 1), "preempted by gang ns/g", victims[:2])
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetSubresource())
		if d, ok := a.(k8stesting.DeleteAction); ok {
			require.NotNil(t, d.GetDeleteOptions().Preconditions)
			assert.Equal(t, types.UID("uid-"+d.GetName()), *d.GetDeleteOptions().Preconditions.UID)
		}
	}
	assert.ElementsMatch(t, []string{"patch status", "patch status", "delete ", "delete "}, verbs)
	assert.Len(t, rec.reasons(reasonPreempted), 2, "one Preempted Event per victim")
	l, err := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, l.Items)
}

// The gang holding a preemption is requeued by its last victim's deletion, not by each one: an
// attempt while victims remain cannot place it and only lengthens its backoff.
func TestHintPodDeleteWaitsForTheLastVictim(t *testing.T) {
	holder := pg("g", time.Now(), 1)
	member := pod("g-0", "g", 1000, 1)
	v1, v2 := pod("v1", "low", 0, 1), pod("v2", "low", 0, 1)
	v1.Spec.NodeName, v2.Spec.NodeName = "n1", "n2"
	other := pod("other", "", 0, 1)
	other.Spec.NodeName = "n3"
	p := testPlugin(t, []*schedulingv1beta1.PodGroup{holder, pg("low", time.Now(), 2)}, []*corev1.Pod{member, v1, v2, other})
	key := gang.Key{Namespace: "ns", Name: "g"}
	p.res.setHold(key, &hold{domain: "HyperNode leaf-0", nodes: sets.New("n1", "n2"), priority: 1000,
		victims: map[string]types.UID{"ns/v1": v1.UID, "ns/v2": v2.UID}, expires: time.Now().Add(time.Minute)})

	// The scheduler calls the hint after the informer dropped the deleted pod.
	require.NoError(t, p.pods.Delete(v1))
	hint, err := p.hintPodDelete(klog.Background(), member, v1, nil)
	require.NoError(t, err)
	assert.Equal(t, fwk.QueueSkip, hint, "v2 is still there")
	hint, _ = p.hintPodDelete(klog.Background(), member, other, nil)
	assert.Equal(t, fwk.Queue, hint, "a pod that is not a victim frees room as before")

	require.NoError(t, p.pods.Delete(v2))
	hint, _ = p.hintPodDelete(klog.Background(), member, v2, nil)
	assert.Equal(t, fwk.Queue, hint, "the last victim left")

	recreated := v2.DeepCopy()
	recreated.UID = "uid-v2-again"
	hint, _ = p.hintPodDelete(klog.Background(), member, recreated, nil)
	assert.Equal(t, fwk.Queue, hint, "a pod of a victim's name but another UID is not a victim")
}
