package podgroup

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/podgroup"
	"github.com/hyperbatch/hyperbatch/internal/defaults"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

const wait = 20 * time.Second

var nsSeq atomic.Int32

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func namespace(t *testing.T) string {
	name := fmt.Sprintf("pg-it-%d", nsSeq.Add(1))
	require.NoError(t, env.Client.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// newJobSet is a gang (hyperbatch-scheduler) JobSet of replicas Jobs × parallelism pods.
func newJobSet(ns, name string, replicas, parallelism int32, spec corev1.PodSpec) *jobsetv1alpha2.JobSet {
	spec.SchedulerName = podgroup.HyperbatchSchedulerName
	spec.RestartPolicy = corev1.RestartPolicyNever
	if len(spec.Containers) == 0 {
		spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	}
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "workers", Replicas: replicas,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(parallelism),
				Template: corev1.PodTemplateSpec{Spec: spec}}},
		}}},
	}
}

func getPG(t *testing.T, ns, name string) (*schedulingv1beta1.PodGroup, error) {
	var pg schedulingv1beta1.PodGroup
	err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: name}, &pg)
	return &pg, err
}

// waitPG waits until the PodGroup exists and cond holds.
func waitPG(t *testing.T, ns, name string, cond func(*schedulingv1beta1.PodGroup) bool) *schedulingv1beta1.PodGroup {
	t.Helper()
	var last *schedulingv1beta1.PodGroup
	require.Eventually(t, func() bool {
		pg, err := getPG(t, ns, name)
		if err != nil {
			return false
		}
		last = pg
		return cond(pg)
	}, wait, 50*time.Millisecond, "PodGroup %s/%s: last seen %+v", ns, name, last)
	return last
}

func waitNoPG(t *testing.T, ns, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := getPG(t, ns, name)
		return apierrors.IsNotFound(err)
	}, wait, 50*time.Millisecond, "PodGroup %s/%s still exists", ns, name)
}

// reconciles is the podgroup controller's reconcile count (controller-runtime's metric).
func reconciles(t *testing.T) float64 {
	mfs, err := metrics.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "podgroup" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// afterReconcile runs change and waits until the controller has finished at least one more
// reconcile (the positive signal before checking that something did not happen).
func afterReconcile(t *testing.T, change func()) {
	t.Helper()
	before := reconciles(t)
	change()
	require.Eventually(t, func() bool { return reconciles(t) > before }, wait, 20*time.Millisecond, "no reconcile after the change")
}

func update(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	require.NoError(t, retryOnConflict(func() error {
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return env.Client.Update(ctx(t), obj)
	}))
}

func retryOnConflict(fn func() error) error {
	var err error
	for i := 0; i < 10; i++ {
		if err = fn(); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func events(t *testing.T, ns, name, reason string) []corev1.Event {
	out, err := framework.EventsAbout(ctx(t), env.Client, ns, "JobSet", name, reason)
	require.NoError(t, err)
	return out
}

func waitEvent(t *testing.T, ns, name, reason string) corev1.Event {
	t.Helper()
	var got []corev1.Event
	require.Eventually(t, func() bool {
		got = events(t, ns, name, reason)
		return len(got) > 0
	}, wait, 50*time.Millisecond, "no %s Event on JobSet %s/%s", reason, ns, name)
	return got[0]
}

func assertQty(t *testing.T, want string, list *corev1.ResourceList, name corev1.ResourceName) {
	t.Helper()
	require.NotNil(t, list)
	got, ok := (*list)[name]
	require.True(t, ok, "minResources has no %s: %v", name, *list)
	w := q(want)
	assert.Zero(t, w.Cmp(got), "%s: want %s, got %s", name, want, got.String())
}

// LimitRange defaults and RuntimeClass overhead reach minResources; a LimitRange change is
// recomputed while the gang has no pod, also when the PodGroup says Running (a phase is no proof of
// pods: Trainer's PodGroup of a suspended TrainJob keeps it); the phase reaches the JobSet as an
// Event.
func TestMinResourcesFromLimitRangeAndRuntimeClass(t *testing.T) {
	ns := namespace(t)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("200m")},
		Default: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("256Mi")},
	}}}}
	require.NoError(t, env.Client.Create(ctx(t), lr))
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata-" + ns}, Handler: "kata",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("64Mi")}}}
	require.NoError(t, env.Client.Create(ctx(t), rc))

	js := newJobSet(ns, "train", 2, 2, corev1.PodSpec{RuntimeClassName: ptr.To(rc.Name),
		InitContainers: []corev1.Container{{Name: "sidecar", Image: "busybox", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("50m")}}}}})
	require.NoError(t, env.Client.Create(ctx(t), js))

	// 4 pods × (app 200m + sidecar 50m + overhead 100m) cpu; memory from the default limit: 4 ×
	// (256Mi app + 256Mi sidecar + 64Mi overhead).
	// The LimitRange and RuntimeClass come through their own watches and may reach the controller
	// after the JobSet: wait for the PodGroup that counts them (the watches recompute it).
	pg := waitPG(t, ns, "train", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinMember == 4 && pg.Spec.MinResources != nil && (*pg.Spec.MinResources).Cpu().Cmp(q("1400m")) == 0 &&
			(*pg.Spec.MinResources).Memory().Cmp(q("2304Mi")) == 0
	})
	assertQty(t, "1400m", pg.Spec.MinResources, corev1.ResourceCPU)
	assertQty(t, "2304Mi", pg.Spec.MinResources, corev1.ResourceMemory)
	require.True(t, metav1.IsControlledBy(pg, js), "PodGroup must be controlled by the JobSet")
	var managed bool
	for _, f := range pg.ManagedFields {
		if f.Manager == podgroup.FieldOwner && f.Operation == metav1.ManagedFieldsOperationApply {
			managed = true
		}
	}
	assert.True(t, managed, "PodGroup must be applied by %s: %+v", podgroup.FieldOwner, pg.ManagedFields)

	// Not running yet: a LimitRange change is recomputed.
	update(t, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = q("500m") })
	pg = waitPG(t, ns, "train", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinResources != nil && (*pg.Spec.MinResources).Cpu().Cmp(q("2600m")) == 0
	})

	// Running (the PodGroup CRD has no status subresource; the test plays the scheduler's status
	// writer): the phase reaches the JobSet as an Event. No pod exists, so a LimitRange change still
	// applies: the price follows the pods (TestLimitRangeKeepsPriceOfStartedGang keeps it).
	update(t, pg, func() { pg.Status.Phase = schedulingv1beta1.PodGroupRunning })
	ev := waitEvent(t, ns, "train", "PodGroupRunning")
	assert.Contains(t, ev.Message, "Running")
	update(t, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = q("900m") })
	pg = waitPG(t, ns, "train", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinResources != nil && (*pg.Spec.MinResources).Cpu().Cmp(q("4200m")) == 0
	})
	assert.Equal(t, schedulingv1beta1.PodGroupRunning, pg.Status.Phase)
	assert.Zero(t, writes.For("jobsets", "train"), "the controller must never write the JobSet")
}

// Suspended: no PodGroup; replicas changed while suspended reach the PodGroup on resume; suspend
// again deletes it.
func TestSuspendResumeAndScale(t *testing.T) {
	ns := namespace(t)
	js := newJobSet(ns, "sus", 2, 4, corev1.PodSpec{})
	js.Spec.Suspend = ptr.To(true)
	afterReconcile(t, func() { require.NoError(t, env.Client.Create(ctx(t), js)) })
	_, err := getPG(t, ns, "sus")
	require.True(t, apierrors.IsNotFound(err), "suspended JobSet must have no PodGroup, got %v", err)

	afterReconcile(t, func() { update(t, js, func() { js.Spec.ReplicatedJobs[0].Replicas = 3 }) })
	_, err = getPG(t, ns, "sus")
	require.True(t, apierrors.IsNotFound(err), "still suspended: no PodGroup, got %v", err)

	update(t, js, func() { js.Spec.Suspend = ptr.To(false) })
	waitPG(t, ns, "sus", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.MinMember == 12 })

	update(t, js, func() { js.Spec.Suspend = ptr.To(true) })
	waitNoPG(t, ns, "sus")
	waitEvent(t, ns, "sus", "PodGroupReleased")
}

// A JobSet that the real JobSet controller (sigs.k8s.io/jobset v0.11.0) ends Completed releases its
// PodGroup at once (the JobSet itself stays). kube-controller-manager's Job controller runs the child
// Jobs; the test plays only the kubelet, which envtest lacks: it marks the pods Succeeded.
func TestFinishedReleases(t *testing.T) {
	framework.StartJobSetAndJobControllers(t, env)

	ns := namespace(t)
	js := newJobSet(ns, "done", 1, 2, corev1.PodSpec{})
	require.NoError(t, env.Client.Create(ctx(t), js))
	waitPG(t, ns, "done", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.MinMember == 2 })

	// The kubelet's part: the Job's 2 pods run to completion.
	succeeded := map[string]bool{}
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		if err := env.Client.List(ctx(t), &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "done"}); err != nil {
			return false
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if succeeded[p.Name] {
				continue
			}
			p.Status.Phase = corev1.PodSucceeded
			if env.Client.Status().Update(ctx(t), p) == nil {
				succeeded[p.Name] = true
			}
		}
		return len(succeeded) == 2
	}, wait, 100*time.Millisecond, "the JobSet controller's Job did not create 2 pods")

	// The positive signal: the JobSet controller itself ends the JobSet Completed.
	require.Eventually(t, func() bool {
		if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(js), js); err != nil {
			return false
		}
		return js.Status.TerminalState == string(jobsetv1alpha2.JobSetCompleted)
	}, time.Minute, 100*time.Millisecond, "the JobSet did not end Completed")
	waitNoPG(t, ns, "done")
	require.NoError(t, env.Client.Get(ctx(t), client.ObjectKeyFromObject(js), js), "the JobSet itself stays")
}

// A LimitRange change does not re-price a gang whose pods exist (the real JobSet and Job controllers
// created them; the apiserver's LimitRanger admitted them at the old default): its PodGroup keeps
// minResources and the JobSet gets a MinResourcesKept Event naming both prices. Re-pricing it would
// make the gang wait for capacity its pods never ask for.
func TestLimitRangeKeepsPriceOfStartedGang(t *testing.T) {
	framework.StartJobSetAndJobControllers(t, env)

	ns := namespace(t)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("250m")},
	}}}}
	require.NoError(t, env.Client.Create(ctx(t), lr))
	require.Eventually(t, func() bool {
		var got corev1.LimitRange
		return ctlCache.Get(ctx(t), client.ObjectKeyFromObject(lr), &got) == nil
	}, wait, 20*time.Millisecond, "the controller's cache never saw the LimitRange")
	js := newJobSet(ns, "started", 1, 2, corev1.PodSpec{})
	require.NoError(t, env.Client.Create(ctx(t), js))
	waitPG(t, ns, "started", func(pg *schedulingv1beta1.PodGroup) bool {
		return pg.Spec.MinResources != nil && (*pg.Spec.MinResources).Cpu().Cmp(q("500m")) == 0
	})
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		if err := env.Client.List(ctx(t), &pods, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: "started"}); err != nil {
			return false
		}
		return len(pods.Items) == 2
	}, wait, 50*time.Millisecond, "the JobSet's Job did not create its 2 pods")

	update(t, lr, func() { lr.Spec.Limits[0].DefaultRequest[corev1.ResourceCPU] = q("5") })
	ev := waitEvent(t, ns, "started", podgroup.ReasonMinResourcesKept)
	assert.Contains(t, ev.Message, "keeps minResources cpu=500m")
	assert.Contains(t, ev.Message, "would give cpu=10")
	pg, err := getPG(t, ns, "started")
	require.NoError(t, err)
	assertQty(t, "500m", pg.Spec.MinResources, corev1.ResourceCPU)
}

// A resync that finds nothing changed writes nothing, counted at the controller's transport.
func TestNoWritesOnResync(t *testing.T) {
	ns := namespace(t)
	js := newJobSet(ns, "steady", 2, 2, corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}}}}})
	// No queue anywhere: the PodGroup CRD's default ("default") must not make every resync apply.
	js.Annotations = map[string]string{"touch": "start"}
	require.NoError(t, env.Client.Create(ctx(t), js))
	pg := waitPG(t, ns, "steady", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.MinMember == 4 })
	assert.Equal(t, "default", pg.Spec.Queue)
	assertQty(t, "6", pg.Spec.MinResources, corev1.ResourceCPU)

	assertNoResyncWrites(t, js)
}

// assertNoResyncWrites updates the JobSet (an annotation the PodGroup does not depend on) and checks
// that the reconciles that follow write nothing, counted at the controller's transport.
func assertNoResyncWrites(t *testing.T, js *jobsetv1alpha2.JobSet) {
	t.Helper()
	touch := func(v string) func() {
		return func() {
			if js.Annotations == nil {
				js.Annotations = map[string]string{}
			}
			js.Annotations["touch"] = v
		}
	}
	// Let the PodGroup's own watch event be reconciled too, then count.
	require.Eventually(t, func() bool {
		before := writes.For("podgroups", js.Name)
		n := reconciles(t)
		afterReconcile(t, func() { update(t, js, touch(time.Now().String())) })
		return writes.For("podgroups", js.Name) == before && reconciles(t) > n
	}, wait, 10*time.Millisecond)
	base := writes.For("podgroups", js.Name)
	for i := 0; i < 3; i++ {
		afterReconcile(t, func() { update(t, js, touch(fmt.Sprint(i))) })
	}
	assert.Equal(t, base, writes.For("podgroups", js.Name), "resyncs with nothing changed must not write PodGroup %s", js.Name)
	assert.Zero(t, writes.For("jobsets", js.Name))
}

// networkTopology from the JobSet's annotations or from a policy, stored with the PodGroup CRD's
// schema defaults (mode defaults to hard), makes no write on resync either; a mode the CRD refuses
// gets an InvalidGang Event and no PodGroup.
func TestNoWritesOnResyncWithNetworkTopology(t *testing.T) {
	ns := namespace(t)
	own := newJobSet(ns, "topo-own", 1, 2, corev1.PodSpec{})
	own.Annotations = map[string]string{defaults.NetworkTopologyModeAnnotation: "hard", defaults.NetworkTopologyHighestTierAnnotation: "2"}
	soft := newJobSet(ns, "topo-soft", 1, 2, corev1.PodSpec{})
	soft.Annotations = map[string]string{defaults.NetworkTopologyModeAnnotation: "soft"}
	for _, js := range []*jobsetv1alpha2.JobSet{own, soft} {
		require.NoError(t, env.Client.Create(ctx(t), js))
	}
	pg := waitPG(t, ns, "topo-own", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.NetworkTopology != nil })
	assert.Equal(t, schedulingv1beta1.HardNetworkTopologyMode, pg.Spec.NetworkTopology.Mode)
	assert.Equal(t, ptr.To(2), pg.Spec.NetworkTopology.HighestTierAllowed)
	pg = waitPG(t, ns, "topo-soft", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.NetworkTopology != nil })
	assert.Equal(t, schedulingv1beta1.SoftNetworkTopologyMode, pg.Spec.NetworkTopology.Mode)
	assert.Nil(t, pg.Spec.NetworkTopology.HighestTierAllowed)
	assertNoResyncWrites(t, own)
	assertNoResyncWrites(t, soft)

	// From a policy that leaves mode to the WorkloadPolicy CRD's default.
	polNS := namespace(t)
	nsObj := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(ctx(t), client.ObjectKey{Name: polNS}, nsObj))
	update(t, nsObj, func() { nsObj.Labels = map[string]string{"pg-topology": polNS} })
	pol := builders.MakePolicy("pg-topology-"+polNS).Selector("pg-topology", polNS).Obj()
	pol.Spec.Defaults.NetworkTopology = &hbv1.NetworkTopology{HighestTierName: "rack"}
	require.NoError(t, env.Client.Create(ctx(t), pol))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pol) })
	byPolicy := newJobSet(polNS, "topo-policy", 1, 2, corev1.PodSpec{})
	require.NoError(t, env.Client.Create(ctx(t), byPolicy))
	pg = waitPG(t, polNS, "topo-policy", func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.NetworkTopology != nil })
	assert.Equal(t, schedulingv1beta1.HardNetworkTopologyMode, pg.Spec.NetworkTopology.Mode)
	assert.Equal(t, "rack", pg.Spec.NetworkTopology.HighestTierName)
	assertNoResyncWrites(t, byPolicy)

	bad := newJobSet(ns, "topo-bad", 1, 2, corev1.PodSpec{})
	bad.Annotations = map[string]string{defaults.NetworkTopologyModeAnnotation: "strict"}
	require.NoError(t, env.Client.Create(ctx(t), bad))
	ev := waitEvent(t, ns, "topo-bad", podgroup.ReasonInvalidGang)
	assert.Contains(t, ev.Message, defaults.NetworkTopologyModeAnnotation)
	_, err := getPG(t, ns, "topo-bad")
	assert.True(t, apierrors.IsNotFound(err), "no PodGroup for an invalid mode, got %v", err)
	assert.Zero(t, writes.For("podgroups", "topo-bad"))
}

// A PodGroup of the JobSet's name that the JobSet does not control is never adopted or written.
func TestForeignPodGroupNotAdopted(t *testing.T) {
	ns := namespace(t)
	foreign := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 7, Queue: "other"}}
	require.NoError(t, env.Client.Create(ctx(t), foreign))
	js := newJobSet(ns, "mine", 1, 2, corev1.PodSpec{})
	require.NoError(t, env.Client.Create(ctx(t), js))

	ev := waitEvent(t, ns, "mine", podgroup.ReasonForeignPodGroup)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, "not adopted")
	pg, err := getPG(t, ns, "mine")
	require.NoError(t, err)
	assert.Equal(t, int32(7), pg.Spec.MinMember)
	assert.Equal(t, "other", pg.Spec.Queue)
	assert.Empty(t, pg.OwnerReferences)
	assert.Zero(t, writes.For("podgroups", "mine"))

	// Once the foreign PodGroup is gone, the JobSet gets its own.
	require.NoError(t, env.Client.Delete(ctx(t), foreign))
	waitPG(t, ns, "mine", func(pg *schedulingv1beta1.PodGroup) bool {
		return metav1.IsControlledBy(pg, js) && pg.Spec.MinMember == 2
	})
}

// The effective-request rule: a large init container wins over app containers plus sidecars; an
// init container after a sidecar counts the sidecar.
func TestInitAndSidecarRules(t *testing.T) {
	ns := namespace(t)
	cpu := func(v string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(v)}}
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	initFirst := newJobSet(ns, "init-first", 1, 2, corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Resources: cpu("3")},
			{Name: "side", Image: "busybox", RestartPolicy: always, Resources: cpu("500m")}},
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: cpu("1")}}})
	sidecarFirst := newJobSet(ns, "sidecar-first", 1, 2, corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "side", Image: "busybox", RestartPolicy: always, Resources: cpu("500m")},
			{Name: "init", Image: "busybox", Resources: cpu("3")}},
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: cpu("1")}}})
	small := newJobSet(ns, "small-init", 1, 2, corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Resources: cpu("100m")},
			{Name: "side", Image: "busybox", RestartPolicy: always, Resources: cpu("500m")}},
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: cpu("1")}}})
	for js, want := range map[*jobsetv1alpha2.JobSet]string{initFirst: "6", sidecarFirst: "7", small: "3"} {
		require.NoError(t, env.Client.Create(ctx(t), js))
		pg := waitPG(t, ns, js.Name, func(pg *schedulingv1beta1.PodGroup) bool { return pg.Spec.MinMember == 2 })
		assertQty(t, want, pg.Spec.MinResources, corev1.ResourceCPU)
	}
}
