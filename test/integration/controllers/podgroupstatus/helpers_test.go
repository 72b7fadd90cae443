package podgroupstatus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/schedulerenv"
	"github.com/hyperbatch/hyperbatch/test/util/builders"

	"github.com/hyperbatch/hyperbatch/test/integration/framework"
)

const gpu = builders.GPU

func ctxFor(t *testing.T, d time.Duration) context.Context { return framework.TestContext(t, d) }

// dumpLogOnFailure prints the end of the suite's log when the test failed.
func dumpLogOnFailure(t *testing.T) { framework.DumpLogOnFailure(t, logPath) }

// namespace creates a fresh namespace for the test; its pods are force-deleted at the end.
func namespace(t *testing.T, prefix string) string {
	return framework.SequencedNamespace(t, cs, prefix)
}

// rack creates nodes fake nodes (8 GPUs, 64 CPUs each, labelled hb-test=<test>) and a tier-1 HyperNode
// selecting them by the label hb-rack=<name>.
func rack(t *testing.T, test, name string, nodes int) {
	t.Helper()
	for i := 0; i < nodes; i++ {
		fakeNode(t, test, fmt.Sprintf("%s-n%d", name, i), name)
	}
	hn := builders.MakeHyperNode(name, 1).TierName("rack").Members(builders.LabelMember("hb-rack", name)).Obj()
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), hn))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), hn)
	})
}

// fakeNode creates a Ready node (no kubelet) in a rack.
func fakeNode(t *testing.T, test, name, rackName string) {
	t.Helper()
	framework.CreateReadyNode(t, cs, builders.MakeNode(name).Label("hb-test", test).Label("hb-rack", rackName).Obj(), builders.GPUNode())
}

// queue creates a Volcano Queue; state "" leaves status alone (no queue controller runs here).
// queueSeq numbers the queues of this process: with go test -count=N every repeat gets queues of
// its own, so the PodGroups an earlier repeat left behind never hold a later repeat's queue.
var queueSeq atomic.Int32

// queueName is base with a suffix unique in this process.
func queueName(base string) string { return fmt.Sprintf("%s-%d", base, queueSeq.Add(1)) }

// queue creates a Queue named queueName(base) and returns its name.
func queue(t *testing.T, base string, capability corev1.ResourceList, state schedulingv1beta1.QueueState, strategy schedulingv1beta1.DequeueStrategy) string {
	t.Helper()
	name := queueName(base)
	createQueue(t, name, capability, state, strategy)
	return name
}

// createQueue creates the Queue name (deleted when the test ends).
func createQueue(t *testing.T, name string, capability corev1.ResourceList, state schedulingv1beta1.QueueState, strategy schedulingv1beta1.DequeueStrategy) {
	t.Helper()
	q := builders.MakeQueue(name).Capability(capability).DequeueStrategy(strategy).Obj()
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), q))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), q) })
	if state != "" {
		setQueueState(t, name, state)
	}
}

// setQueueState writes the Queue's status.state as Volcano's queue controller does on an
// open/close command.
func setQueueState(t *testing.T, name string, state schedulingv1beta1.QueueState) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var q schedulingv1beta1.Queue
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &q); err != nil {
			return err
		}
		q.Status.State = state
		return env.Client.Status().Update(context.Background(), &q)
	}))
}

// waitCachedQueueState waits until the controller's cache holds the Queue with this status.state.
func waitCachedQueueState(t *testing.T, name string, state schedulingv1beta1.QueueState) {
	t.Helper()
	var last schedulingv1beta1.QueueState
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var q schedulingv1beta1.Queue
		err := ctl.cache.Get(ctx, client.ObjectKey{Name: name}, &q)
		last = q.Status.State
		return err == nil && last == state, client.IgnoreNotFound(err) // not cached yet: poll again
	})
	require.NoError(t, err, "Queue %s in the controller's cache: state %q, want %q", name, last, state)
}

type pgOpts struct {
	queue     string
	minMember int32
	minGPU    int64
	topology  *schedulingv1beta1.NetworkTopologySpec
	owner     *metav1.OwnerReference
}

func podGroup(t *testing.T, ns, name string, o pgOpts) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg := builders.MakePodGroup(ns, name).MinMember(o.minMember).Queue(o.queue).NetworkTopology(o.topology).MinGPUs(o.minGPU).Owner(o.owner).Obj()
	require.NoError(t, env.Client.Create(ctxFor(t, 30*time.Second), pg))
	return pg
}

func hardTier1() *schedulingv1beta1.NetworkTopologySpec { return builders.HardTier(1) }

// gangPods creates n pods of group asking for gpus GPUs each, for schedulerName, on the test's nodes.
func gangPods(t *testing.T, test, ns, group, schedulerName string, n int, gpus int64) {
	t.Helper()
	gangPodsFrom(t, test, ns, group, schedulerName, 0, n, gpus)
}

// gangPodsFrom creates pods number from..from+n-1 of group (see gangPods).
func gangPodsFrom(t *testing.T, test, ns, group, schedulerName string, from, n int, gpus int64) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	for i := from; i < from+n; i++ {
		p := builders.MakeGangPod(ns, fmt.Sprintf("%s-%d", group, i), group, schedulerName).Label("group", group).
			NodeSelector("hb-test", test).GPUs(gpus).Obj()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func groupPods(t *testing.T, ns, group string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(ctxFor(t, 30*time.Second), metav1.ListOptions{LabelSelector: "group=" + group})
	require.NoError(t, err)
	return l.Items
}

// waitBound waits until n pods of the group are bound and returns their nodes.
func waitBound(t *testing.T, ns, group string, n int) []string {
	t.Helper()
	var nodes []string
	waitFor(t, 60*time.Second, fmt.Sprintf("%d pods of %s bound", n, group), func(ctx context.Context) (bool, error) {
		nodes = nodes[:0]
		for _, p := range groupPods(t, ns, group) {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) >= n, nil
	})
	return nodes
}

// setPodsPhase plays the kubelet: every bound pod of the group gets the phase.
func setPodsPhase(t *testing.T, ns, group string, phase corev1.PodPhase) {
	t.Helper()
	for _, p := range groupPods(t, ns, group) {
		if p.Spec.NodeName == "" {
			continue
		}
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Phase = phase
			ready := corev1.ConditionFalse
			if phase == corev1.PodRunning {
				ready = corev1.ConditionTrue
			}
			cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()})
			_, err = cs.CoreV1().Pods(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			return err
		}), "pod %s", p.Name)
	}
}

func getPG(ctx context.Context, ns, name string) (*schedulingv1beta1.PodGroup, error) {
	var pg schedulingv1beta1.PodGroup
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pg)
	return &pg, err
}

// waitPG waits until the PodGroup satisfies cond and returns it.
func waitPG(t *testing.T, ns, name, what string, cond func(*schedulingv1beta1.PodGroup) bool) *schedulingv1beta1.PodGroup {
	t.Helper()
	var last *schedulingv1beta1.PodGroup
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := getPG(ctx, ns, name)
		if err != nil {
			lastErr = err
			return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
		}
		last = pg
		return cond(pg), nil
	})
	if err != nil {
		var st any
		if last != nil {
			st = last.Status
		}
		t.Fatalf("PodGroup %s/%s: timed out waiting for %s; last status %+v (last error %v)", ns, name, what, st, lastErr)
	}
	return last
}

func phaseIs(p schedulingv1beta1.PodGroupPhase) func(*schedulingv1beta1.PodGroup) bool {
	return func(pg *schedulingv1beta1.PodGroup) bool { return pg.Status.Phase == p }
}

func condition(pg *schedulingv1beta1.PodGroup, t schedulingv1beta1.PodGroupConditionType) *schedulingv1beta1.PodGroupCondition {
	for i := range pg.Status.Conditions {
		if pg.Status.Conditions[i].Type == t {
			return &pg.Status.Conditions[i]
		}
	}
	return nil
}

// unschedulable matches a PodGroup whose Unschedulable condition has the status and reason and whose
// message holds every fragment.
func unschedulable(status corev1.ConditionStatus, reason string, fragments ...string) func(*schedulingv1beta1.PodGroup) bool {
	return func(pg *schedulingv1beta1.PodGroup) bool {
		c := condition(pg, schedulingv1beta1.PodGroupUnschedulableType)
		if c == nil || c.Status != status || c.Reason != reason {
			return false
		}
		for _, f := range fragments {
			if !strings.Contains(c.Message, f) {
				return false
			}
		}
		return true
	}
}

// phaseRecorder watches the PodGroups of a namespace and records every phase each is stored with.
type phaseRecorder struct {
	mu     sync.Mutex
	name   string // the PodGroup get reports
	phases map[string][]schedulingv1beta1.PodGroupPhase
}

// recordPhases records the phases of the PodGroups of ns; get reports those of name (settable later
// with of, for PodGroups whose name is not known in advance).
func recordPhases(t *testing.T, ns, name string) *phaseRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &schedulingv1beta1.PodGroupList{}, client.InNamespace(ns))
	require.NoError(t, err)
	r := &phaseRecorder{name: name, phases: map[string][]schedulingv1beta1.PodGroupPhase{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if pg, ok := ev.Object.(*schedulingv1beta1.PodGroup); ok {
				r.mu.Lock()
				p := r.phases[pg.Name]
				if n := len(p); n == 0 || p[n-1] != pg.Status.Phase {
					r.phases[pg.Name] = append(p, pg.Status.Phase)
				}
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel() })
	return r
}

func (r *phaseRecorder) of(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.name = name
}

func (r *phaseRecorder) get() []schedulingv1beta1.PodGroupPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schedulingv1beta1.PodGroupPhase(nil), r.phases[r.name]...)
}

// waitEvent waits for an Event on the PodGroup with the reason and message fragments.
func waitEvent(t *testing.T, ns, pg, reason string, fragments ...string) {
	t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // a failed list is retried until the timeout
		}
		notes = notes[:0]
		for _, e := range l.Items {
			if e.InvolvedObject.Kind != "PodGroup" || e.InvolvedObject.Name != pg {
				continue
			}
			notes = append(notes, e.Reason+": "+e.Message)
			if e.Reason == reason && containsAll(e.Message, fragments) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on PodGroup %s/%s with %q; its events: %q", reason, ns, pg, fragments, notes)
	}
}

func containsAll(s string, fragments []string) bool {
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

const hb = schedulerenv.SchedulerName

func metav1ObjectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
