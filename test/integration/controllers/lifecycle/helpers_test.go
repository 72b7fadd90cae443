package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"
)

const (
	deadlineKey = hbv1.ActiveDeadlineSecondsAnnotation
	ttlKey      = hbv1.TTLSecondsAfterFinishedAnnotation
)

func newNamespace(t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func lifecycleAnnotations(deadline, ttl int) map[string]string {
	a := map[string]string{}
	if deadline > 0 {
		a[deadlineKey] = strconv.Itoa(deadline)
	}
	if ttl >= 0 {
		a[ttlKey] = strconv.Itoa(ttl)
	}
	return a
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyOnFailure,
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "main", Image: "busybox:1"}},
	}}
}

// newHyperJob has one replicatedJob of `children` replicas, each a one-pod Volcano Job. ttl < 0: none.
func newHyperJob(ns, name string, children int32, deadline, ttl int) *trainingv1alpha1.HyperJob {
	return &trainingv1alpha1.HyperJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: lifecycleAnnotations(deadline, ttl)},
		Spec: trainingv1alpha1.HyperJobSpec{ReplicatedJobs: []trainingv1alpha1.ReplicatedJob{{
			Name: "w", Replicas: children,
			TemplateSpec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{
				{Name: "worker", Replicas: 1, Template: podTemplate()}}},
		}}},
	}
}

func newVCJob(ns, name string, deadline int) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: lifecycleAnnotations(deadline, -1)},
		Spec: batchv1alpha1.JobSpec{MinAvailable: 1, Queue: "default", Tasks: []batchv1alpha1.TaskSpec{
			{Name: "worker", Replicas: 1, Template: podTemplate()}}},
	}
}

// newJobSet is a JobSet with what the JobSet webhook would default set explicitly (no webhook runs
// here): one replicatedJob of `pods` one-pod Jobs.
func newJobSet(ns, name string, pods int32, deadline int, suspend bool, ttl *int32) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: lifecycleAnnotations(deadline, -1)},
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend:                 ptr.To(suspend),
			TTLSecondsAfterFinished: ttl,
			SuccessPolicy:           &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
			StartupPolicy:           &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder},
			Network:                 &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(false), PublishNotReadyAddresses: ptr.To(true)},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "w", Replicas: pods,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
					CompletionMode: ptr.To(batchv1.IndexedCompletion),
					Template:       podTemplate(),
				}},
			}},
		},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), obj), "creating %T %s", obj, obj.GetName())
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

func get(ctx context.Context, obj client.Object, ns, name string) error {
	return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

func trueCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	if c := apimeta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}

// waitForFailed waits for the object's Failed condition and returns it, checking its reason.
func waitForHyperJobFailed(t *testing.T, ns, name string) (*trainingv1alpha1.HyperJob, metav1.Condition) {
	t.Helper()
	var hj trainingv1alpha1.HyperJob
	var c *metav1.Condition
	waitFor(t, 20*time.Second, "HyperJob "+name+" Failed", func(ctx context.Context) (bool, error) {
		if err := get(ctx, &hj, ns, name); err != nil {
			return false, err
		}
		c = trueCondition(hj.Status.Conditions, "Failed")
		return c != nil, nil
	})
	require.Equal(t, "DeadlineExceeded", c.Reason)
	return &hj, *c
}

func waitForJobSetFailed(t *testing.T, ns, name string) (*jobsetv1alpha2.JobSet, metav1.Condition) {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	var c *metav1.Condition
	waitFor(t, 20*time.Second, "JobSet "+name+" Failed", func(ctx context.Context) (bool, error) {
		if err := get(ctx, &js, ns, name); err != nil {
			return false, err
		}
		c = trueCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
		return c != nil, nil
	})
	require.Equal(t, "DeadlineExceeded", c.Reason)
	return &js, *c
}

// requireWithin checks that an action recorded at `at` (a second-precision API timestamp) happened
// `want` after `from` (also second-precision): within [want-1s, want+slack].
func requireWithin(t *testing.T, what string, from, at time.Time, want time.Duration) {
	const slack = 2 * time.Second
	t.Helper()
	got := at.Sub(from)
	require.GreaterOrEqual(t, got, want-time.Second, "%s: %s after the start, want %s", what, got, want)
	require.LessOrEqual(t, got, want+slack, "%s: %s after the start, want %s (+%s)", what, got, want, slack)
}

// events lists the Events about the object (by UID) with the reason.
func events(ctx context.Context, ns string, uid types.UID, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.UID == uid && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitEvent waits until an Event with reason about the object uid exists (the recorder writes it
// asynchronously, after the action it reports), then requires exactly one (the action happened once).
func waitEvent(t *testing.T, ns string, uid types.UID, reason string) []corev1.Event {
	t.Helper()
	var es []corev1.Event
	waitFor(t, 30*time.Second, reason+" Event", func(ctx context.Context) (bool, error) {
		var err error
		es, err = events(ctx, ns, uid, reason)
		return eventCount(es) >= 1, err
	})
	require.EqualValues(t, 1, eventCount(es), "%s Events", reason)
	return es
}

// eventCount sums the counts of the Events (the recorder aggregates repeats into one with count n).
func eventCount(es []corev1.Event) int32 {
	var n int32
	for _, e := range es {
		n += max(e.Count, 1)
	}
	return n
}

func childJobs(ctx context.Context, ns, hj string) ([]batchv1alpha1.Job, error) {
	var l batchv1alpha1.JobList
	err := env.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{hbv1.HyperJobNameLabel: hj})
	return l.Items, err
}

func waitForChildren(t *testing.T, ns, hj string, n int) []batchv1alpha1.Job {
	t.Helper()
	var jobs []batchv1alpha1.Job
	waitFor(t, 30*time.Second, fmt.Sprintf("%d children of %s", n, hj), func(ctx context.Context) (bool, error) {
		var err error
		jobs, err = childJobs(ctx, ns, hj)
		return len(jobs) == n, err
	})
	return jobs
}

func updateHyperJob(t *testing.T, ns, name string, mutate func(*trainingv1alpha1.HyperJob)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var hj trainingv1alpha1.HyperJob
		if err := get(context.Background(), &hj, ns, name); err != nil {
			return err
		}
		mutate(&hj)
		return env.Client.Update(context.Background(), &hj)
	}))
}

func actions(kind, action string) float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "hyperbatch_lifecycle_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k, a string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "kind":
					k = l.GetValue()
				case "action":
					a = l.GetValue()
				}
			}
			if k == kind && a == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
