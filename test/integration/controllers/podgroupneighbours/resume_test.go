package podgroupneighbours

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	hbwebhook "github.com/hyperbatch/hyperbatch/webhook"
)

const wait = 60 * time.Second

var nsSeq atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("pg-resume-%d", nsSeq.Add(1))
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

// gangJobSet is a suspended hyperbatch-scheduler JobSet of replicas Jobs × parallelism pods whose
// container asks for nothing: its requests come from the namespace's LimitRange.
func gangJobSet(ns, name string, replicas, parallelism int32) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(true),
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "workers", Replicas: replicas,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To(parallelism), Completions: ptr.To(parallelism),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						SchedulerName: podgroup.HyperbatchSchedulerName, RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
					}},
				}},
			}},
		},
	}
}

func cpuDefault(ns, cpu string) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
}

// mutate reads obj, changes it and writes it back, retrying on conflicts.
func mutate(ctx context.Context, obj client.Object, change func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return env.Client.Update(ctx, obj)
	})
}

func setSuspend(t *testing.T, js *jobsetv1alpha2.JobSet, suspend bool) {
	t.Helper()
	require.NoError(t, mutate(context.Background(), js, func() { js.Spec.Suspend = ptr.To(suspend) }))
}

func jobSetPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name})
	return pods.Items, err
}

// order records, from watches on the namespace's Pods and PodGroups opened before the resume, the
// resourceVersion at which each object (by UID) was first seen. A watch delivers an object's
// creation as ADDED carrying the resourceVersion of that write; kube-apiserver's resourceVersions
// are etcd revisions, one counter for every resource of the cluster, so they order a PodGroup's
// creation against a pod's.
type order struct {
	mu    sync.Mutex
	first map[types.UID]uint64
}

func watchOrder(t *testing.T, ns string) *order {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := &order{first: map[types.UID]uint64{}}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &schedulingv1beta1.PodGroupList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if !ok || ev.Type == watch.Error || ev.Type == watch.Bookmark {
					continue
				}
				rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
				if err != nil {
					continue
				}
				o.mu.Lock()
				if _, seen := o.first[obj.GetUID()]; !seen {
					o.first[obj.GetUID()] = rv
				}
				o.mu.Unlock()
			}
		}()
	}
	return o
}

// createdAt is the resourceVersion of the object's creation, waiting until the watch delivered it.
func (o *order) createdAt(t *testing.T, obj client.Object) uint64 {
	t.Helper()
	var rv uint64
	framework.Eventually(t, 10*time.Second, "the watch to deliver "+obj.GetName(), func(context.Context) (bool, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		var ok bool
		rv, ok = o.first[obj.GetUID()]
		return ok, nil
	})
	return rv
}

// assertPodGroupFirst checks that the PodGroup was created before every pod: by watch order
// (resourceVersion) and by creationTimestamp (whole seconds, so only "not after").
func (o *order) assertPodGroupFirst(t *testing.T, pg *schedulingv1beta1.PodGroup, pods []corev1.Pod) {
	t.Helper()
	pgRV := o.createdAt(t, pg)
	for i := range pods {
		p := &pods[i]
		podRV := o.createdAt(t, p)
		assert.Less(t, pgRV, podRV, "pod %s (created at resourceVersion %d) was created before PodGroup %s (resourceVersion %d)", p.Name, podRV, pg.Name, pgRV)
		assert.False(t, p.CreationTimestamp.Before(&pg.CreationTimestamp), "pod %s created at %s, before PodGroup %s at %s",
			p.Name, p.CreationTimestamp, pg.Name, pg.CreationTimestamp)
		assert.Equal(t, pg.Name, p.Annotations[defaults.GroupNameAnnotation], "pod %s is not in the gang", p.Name)
	}
}

// refusals are the Job controller's FailedCreate Events in ns that carry the gate's message.
func refusals(ctx context.Context, ns string) ([]corev1.Event, error) {
	var evs corev1.EventList
	if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Job" && e.Reason == "FailedCreate" && strings.Contains(e.Message, hbwebhook.ReasonPodGroupMissing) {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitRunningGang waits until the JobSet has want pods and its PodGroup exists, and returns both.
func waitRunningGang(t *testing.T, ns, name string, want int) (*schedulingv1beta1.PodGroup, []corev1.Pod) {
	t.Helper()
	var pods []corev1.Pod
	pg := &schedulingv1beta1.PodGroup{}
	framework.Eventually(t, wait, fmt.Sprintf("%d pods and the PodGroup of JobSet %s", want, name), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = jobSetPods(ctx, ns, name); err != nil || len(pods) != want {
			return false, err
		}
		return true, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pg)
	})
	return pg, pods
}

// waitCPU waits until the PodGroup's minResources cpu is want (a LimitRange change and a resume are
// two events; the PodGroup applied on the one seen first is corrected on the other) and checks that
// every pod was admitted with the per-pod share.
func waitCPU(t *testing.T, pg *schedulingv1beta1.PodGroup, pods []corev1.Pod, want, perPod string) {
	t.Helper()
	framework.Eventually(t, wait, "PodGroup minResources cpu "+want, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pg), pg); err != nil || pg.Spec.MinResources == nil {
			return false, err
		}
		got := (*pg.Spec.MinResources)[corev1.ResourceCPU]
		w := resource.MustParse(want)
		return w.Cmp(got) == 0, nil
	})
	for _, p := range pods {
		got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		pp := resource.MustParse(perPod)
		assert.Zero(t, pp.Cmp(got), "pod %s admitted with cpu %s, want %s", p.Name, got.String(), perPod)
	}
}

// On resume the PodGroup is created before any pod of the gang, with the real JobSet controller and
// Job controller, even while controllers/podgroup is held back: the gate refuses the Job controller's
// pods (FailedCreate, naming the PodGroup) until the PodGroup exists. A LimitRange change made while
// suspended is in the PodGroup applied on resume. A second suspend/resume, not held, keeps the order.
func TestResumeCreatesPodGroupBeforePods(t *testing.T) {
	framework.StartJobSetAndJobControllers(t, env.Env)
	ctx := context.Background()
	ns := namespace(t)
	lr := cpuDefault(ns, "100m")
	require.NoError(t, env.Client.Create(ctx, lr))
	before, err := framework.ReconcileTotal("podgroup")
	require.NoError(t, err)
	js := gangJobSet(ns, "train", 2, 2)
	require.NoError(t, env.Client.Create(ctx, js))
	require.Equal(t, "train", js.Spec.ReplicatedJobs[0].Template.Spec.Template.Annotations[defaults.GroupNameAnnotation],
		"the JobSet webhook puts the pods in the gang")

	// Positive signal: the JobSet controller made its 2 Jobs, suspended; no pod and no PodGroup.
	framework.Eventually(t, wait, "2 suspended Jobs", func(ctx context.Context) (bool, error) {
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			if !ptr.Deref(j.Spec.Suspend, false) {
				return false, nil
			}
		}
		return len(jobs.Items) == 2, nil
	})
	framework.Eventually(t, wait, "a podgroup reconcile of the suspended JobSet", func(context.Context) (bool, error) {
		n, err := framework.ReconcileTotal("podgroup")
		return n > before, err
	})
	require.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(js), &schedulingv1beta1.PodGroup{})),
		"a suspended JobSet has no PodGroup")

	// While suspended: JobSet v0.11.0's own webhook refuses replica and container changes (only pod
	// labels, annotations, nodeSelector, tolerations and scheduling gates may change); what the
	// pods will be admitted with can change, through the namespace's LimitRange.
	err = mutate(ctx, js, func() { js.Spec.ReplicatedJobs[0].Replicas = 3 })
	require.Error(t, err, "JobSet's webhook admitted a replicas change")
	assert.Contains(t, err.Error(), "immutable")
	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("250m") }))

	// Resume with controllers/podgroup held at its PodGroup write.
	rec := watchOrder(t, ns)
	hold.Hold()
	t.Cleanup(hold.Release)
	setSuspend(t, js, false)
	framework.Eventually(t, wait, "controllers/podgroup to try to write the PodGroup (held)", func(context.Context) (bool, error) {
		return hold.Blocked() > 0, nil
	})
	var refused []corev1.Event
	framework.Eventually(t, wait, "the Job controller's pods to be refused by the gate", func(ctx context.Context) (bool, error) {
		var err error
		refused, err = refusals(ctx, ns)
		return len(refused) > 0, err
	})
	assert.Contains(t, refused[0].Message, fmt.Sprintf("PodGroup %s/train of JobSet train does not exist yet", ns))
	pods, err := jobSetPods(ctx, ns, "train")
	require.NoError(t, err)
	require.Empty(t, pods, "pods were created while the PodGroup was missing")
	hold.Release()

	pg, pods := waitRunningGang(t, ns, "train", 4)
	rec.assertPodGroupFirst(t, pg, pods)
	assert.Equal(t, int32(4), pg.Spec.MinMember)
	waitCPU(t, pg, pods, "1", "250m") // 4 pods × 250m, the LimitRange as it was at resume

	// Suspend: the PodGroup and the pods go. Change the LimitRange, resume (not held): same order.
	setSuspend(t, js, true)
	framework.Eventually(t, wait, "the PodGroup and the pods to go on suspend", func(ctx context.Context) (bool, error) {
		pods, err := jobSetPods(ctx, ns, "train")
		if err != nil || len(pods) > 0 {
			return false, err
		}
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(js), &schedulingv1beta1.PodGroup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	require.NoError(t, mutate(ctx, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = resource.MustParse("500m") }))
	setSuspend(t, js, false)
	pg2, pods := waitRunningGang(t, ns, "train", 4)
	assert.NotEqual(t, pg.UID, pg2.UID, "a new PodGroup after the second resume")
	rec.assertPodGroupFirst(t, pg2, pods)
	waitCPU(t, pg2, pods, "2", "500m")
}
