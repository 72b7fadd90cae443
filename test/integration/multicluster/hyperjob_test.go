package multicluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	trainingv1alpha1 "volcano.sh/apis/pkg/apis/training/v1alpha1"

	hbv1 "github.com/hyperbatch/hyperbatch/api/v1alpha1"
	"github.com/hyperbatch/hyperbatch/controllers/hyperjob"
	"github.com/hyperbatch/hyperbatch/internal/scheme"
	"github.com/hyperbatch/hyperbatch/test/integration/framework"
	"github.com/hyperbatch/hyperbatch/test/integration/framework/federation"
	"github.com/hyperbatch/hyperbatch/test/util/builders"
)

// karmadaPolicyFinalizer is the finalizer karmada-webhook adds to every PropagationPolicy.
const karmadaPolicyFinalizer = "karmada.io/propagation-policy-controller"

// TestHyperJobAcrossMembers: hyperbatch's HyperJob controller runs against the Karmada apiserver
// (loaded from the plane's kubeconfig; no Volcano controller runs there). A HyperJob with two
// replicatedJobs (replicas 2 for member1, 1 for member2; maxDomains 2) becomes three child Volcano
// Jobs whose PropagationPolicies are held (spec.suspension.dispatching) until Karmada's scheduler has
// given every child's ResourceBinding a cluster, then released together; no member gets a child
// before that. Karmada applies the children in their members, where Volcano's controllers and
// Volcano's own scheduler (vc-scheduler) run them on kwok nodes to completion; the HyperJob becomes
// Completed on the plane with each child's state and the final pod counts. Karmada's permanent-id
// labels and finalizers stay on our objects and nothing is rewritten on later passes; deleting the
// HyperJob removes every child from every member within 60 s.
func TestHyperJobAcrossMembers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns, name = "across", "hj"
	require.NoError(t, plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	startHyperJobController(t, ns)

	// The timeline: every change of the plane's PropagationPolicies and ResourceBindings and of the
	// members' Volcano Jobs in the namespace, recorded from before the HyperJob exists.
	tl := &timeline{ns: ns}
	tl.watch(ctx, t, "plane", plane.Config, &policyv1alpha1.PropagationPolicyList{})
	tl.watch(ctx, t, "plane", plane.Config, &workv1alpha2.ResourceBindingList{})
	tl.watch(ctx, t, "plane", plane.Config, &batchv1alpha1.JobList{})
	for _, m := range sortedNames() {
		tl.watch(ctx, t, m, members[m].Config, &batchv1alpha1.JobList{})
	}

	// rj a: 2 children of 2 pods × 4 GPUs for member1 (3 nodes of 8); rj b: 1 child of 2 pods × 2
	// GPUs for member2 (2 nodes of 4). Volcano's own scheduler places the pods in the members.
	podTemplate := func(gpus int64) corev1.PodTemplateSpec {
		p := builders.PodTemplate("busybox:1", gpus)
		p.Spec.SchedulerName = "volcano"
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		return p
	}
	rjA := builders.MakeReplicatedJob("a", 2).Clusters("member1").Template(podTemplate(4)).Obj()
	rjA.TemplateSpec.Tasks[0].Replicas, rjA.TemplateSpec.MinAvailable = 2, 2
	rjB := builders.MakeReplicatedJob("b", 1).Clusters("member2").Template(podTemplate(2)).Obj()
	rjB.TemplateSpec.Tasks[0].Replicas, rjB.TemplateSpec.MinAvailable = 2, 2
	for _, rj := range []*trainingv1alpha1.ReplicatedJob{&rjA, &rjB} {
		rj.TemplateSpec.SchedulerName = "volcano"
		rj.TemplateSpec.Queue = "default"
	}
	hj := builders.MakeHyperJob(ns, name).ReplicatedJobs(rjA, rjB).Obj()
	hj.Spec.MaxDomains = ptr.To[int32](2)
	created := time.Now()
	require.NoError(t, plane.Client.Create(ctx, hj))

	want := map[string]string{"hj-a-0": "member1", "hj-a-1": "member1", "hj-b-0": "member2"}
	wantNames := []string{"hj-a-0", "hj-a-1", "hj-b-0"}

	// Every child runs in its member to Completed (Volcano's controllers and vc-scheduler there).
	for child, m := range want {
		waitFor(ctx, t, fmt.Sprintf("child %s Completed in %s", child, m), func(ctx context.Context) (bool, string) {
			var j batchv1alpha1.Job
			if err := members[m].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: child}, &j); err != nil {
				return false, err.Error()
			}
			return j.Status.State.Phase == batchv1alpha1.Completed, describe(j.Status)
		})
	}
	t.Logf("all 3 children Completed in their members %s after the HyperJob's creation", time.Since(created).Round(100*time.Millisecond))

	// The HyperJob is Completed on the plane with each child's state and the pods' final counts.
	var got trainingv1alpha1.HyperJob
	waitFor(ctx, t, "the HyperJob Completed on the plane", func(ctx context.Context) (bool, string) {
		if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &got); err != nil {
			return false, err.Error()
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, hyperjob.ConditionCompleted), describe(got.Status)
	})
	t.Logf("HyperJob Completed on the plane %s after its creation", time.Since(created).Round(100*time.Millisecond))
	rjs := map[string]trainingv1alpha1.ReplicatedJobStatus{}
	for _, s := range got.Status.ReplicatedJobsStatus {
		rjs[s.Name] = s
	}
	for rj, children := range map[string][]string{"a": {"hj-a-0", "hj-a-1"}, "b": {"hj-b-0"}} {
		s := rjs[rj]
		assert.ElementsMatch(t, children, keysOf(s.JobStates), "replicatedJob %s: one state per child", rj)
		for _, c := range children {
			assert.Equal(t, batchv1alpha1.Completed, s.JobStates[c].Phase, "child %s's state", c)
		}
		assert.Equal(t, int32(2*len(children)), s.Succeeded, "replicatedJob %s: final succeeded pods (%d children × 2)", rj, len(children))
		assert.Zero(t, s.Failed+s.Running+s.Pending, "replicatedJob %s: no failed, running or pending pods: %s", rj, describe(s))
	}

	// The gate, from the timeline: every PropagationPolicy was created suspended, and every one was
	// released after Karmada's scheduler had given every child's binding a cluster, in one pass.
	ev := tl.snapshot()
	firstRelease := -1
	scheduledAt := map[string]int{}
	for i, e := range ev {
		switch e.kind {
		case "ResourceBinding":
			if len(e.clusters) > 0 {
				if _, ok := scheduledAt[e.name]; !ok {
					scheduledAt[e.name] = i
				}
			}
		case "PropagationPolicy":
			if !e.suspended && firstRelease < 0 && e.typ != watch.Deleted {
				firstRelease = i
			}
		}
	}
	require.GreaterOrEqual(t, firstRelease, 0, "a PropagationPolicy was released:\n%s", tl)
	for _, c := range wantNames {
		first, ok := tl.first("plane", "PropagationPolicy", c)
		require.True(t, ok, "PropagationPolicy %s seen:\n%s", c, tl)
		assert.True(t, first.suspended, "PropagationPolicy %s created with dispatching suspended", c)
		at, ok := scheduledAt[c+"-job"]
		require.True(t, ok, "ResourceBinding %s-job scheduled:\n%s", c, tl)
		assert.Less(t, ev[at].rv, ev[firstRelease].rv, "binding %s-job had a cluster before any PropagationPolicy was released:\n%s", c, tl)
		assert.Equal(t, []string{want[c]}, ev[at].clusters, "Karmada's scheduler placed %s in %s", c, want[c])
	}
	// No member received a child before the release, and each member only its own children.
	for i, e := range ev {
		if e.kind != "Job" || e.src == "plane" || e.typ != watch.Added {
			continue
		}
		assert.Greater(t, i, firstRelease, "%s received %s only after the release:\n%s", e.src, e.name, tl)
		assert.Equal(t, want[e.name], e.src, "child %s applied in its own member", e.name)
	}
	releases, err := hyperJobEvents(ctx, ns, name, hyperjob.ReasonDispatchingChildren)
	require.NoError(t, err)
	require.Len(t, releases, 1, "one release Event: %s", describe(releases))
	assert.Equal(t, int32(1), releases[0].Count)
	for _, part := range []string{"dispatching all 3 at once", "member1: 2 (hj-a-0, hj-a-1)", "member2: 1 (hj-b-0)"} {
		assert.Contains(t, releases[0].Message, part)
	}
	t.Logf("release Event: %s", releases[0].Message)
	if t.Failed() {
		t.Logf("timeline:\n%s", tl)
	}

	// Karmada's foreign keys stay on our objects: the policies keep the permanent id and finalizer
	// karmada-webhook put there, the children the labels Karmada's detector wrote.
	var pps policyv1alpha1.PropagationPolicyList
	require.NoError(t, plane.Client.List(ctx, &pps, client.InNamespace(ns)))
	require.Len(t, pps.Items, 3)
	var jobs batchv1alpha1.JobList
	require.NoError(t, plane.Client.List(ctx, &jobs, client.InNamespace(ns)))
	require.Len(t, jobs.Items, 3)
	ppID := map[string]string{}
	for _, pp := range pps.Items {
		assert.NotEmpty(t, pp.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel], "PropagationPolicy %s keeps its permanent id", pp.Name)
		assert.Contains(t, pp.Finalizers, karmadaPolicyFinalizer, "PropagationPolicy %s keeps Karmada's finalizer", pp.Name)
		assert.False(t, suspendedPP(&pp), "PropagationPolicy %s released", pp.Name)
		ppID[pp.Name] = pp.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel]
	}
	for _, j := range jobs.Items {
		assert.Equal(t, ppID[j.Name], j.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel], "child %s keeps the label Karmada's detector wrote", j.Name)
		assert.Contains(t, j.Finalizers, hbv1.HyperJobChildFinalizer, "child %s keeps the HyperJob's finalizer on the plane", j.Name)
	}

	// No fight: two more reconcile passes (each observed as a successful reconcile in the
	// controller's own metrics, after a label change of the HyperJob) rewrite neither a
	// PropagationPolicy nor a control-plane child.
	before := resourceVersions(ctx, t, ns)
	for i := range 2 {
		n := reconciles(t)
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur trainingv1alpha1.HyperJob
			if err := plane.Client.Get(ctx, client.ObjectKeyFromObject(hj), &cur); err != nil {
				return err
			}
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			cur.Labels["test.hyperbatch.dev/poke"] = strconv.Itoa(i)
			return plane.Client.Update(ctx, &cur)
		}))
		waitFor(ctx, t, fmt.Sprintf("reconcile pass %d after completion", i+1), func(context.Context) (bool, string) {
			got := reconciles(t)
			return got > n, fmt.Sprintf("successful reconciles %v, before %v", got, n)
		})
	}
	after := resourceVersions(ctx, t, ns)
	assert.Equal(t, before, after, "no PropagationPolicy or control-plane child changed across two more passes")

	// Deleting the HyperJob removes every child from every member within 60 s, and everything on
	// the plane, with no finalizer stuck.
	require.NoError(t, plane.Client.Delete(ctx, hj))
	deleted := time.Now()
	gone, cancelGone := context.WithTimeout(ctx, 60*time.Second)
	defer cancelGone()
	waitFor(gone, t, "every child gone from every member and the plane", func(ctx context.Context) (bool, string) {
		var left []string
		for _, m := range sortedNames() {
			var l batchv1alpha1.JobList
			if err := members[m].Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			for _, j := range l.Items {
				left = append(left, fmt.Sprintf("%s/%s%v", m, j.Name, j.Finalizers))
			}
		}
		for _, l := range []client.ObjectList{&batchv1alpha1.JobList{}, &policyv1alpha1.PropagationPolicyList{}, &workv1alpha2.ResourceBindingList{}} {
			if err := plane.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			items, _ := apimeta.ExtractList(l)
			for _, it := range items {
				o := it.(client.Object)
				left = append(left, fmt.Sprintf("plane/%T/%s%v", o, o.GetName(), o.GetFinalizers()))
			}
		}
		for _, m := range sortedNames() {
			var works workv1alpha1.WorkList
			if err := plane.Client.List(ctx, &works, client.InNamespace("karmada-es-"+m)); err != nil {
				return false, err.Error()
			}
			for _, w := range works.Items {
				if strings.HasPrefix(w.Name, name+"-") {
					left = append(left, "work/"+m+"/"+w.Name)
				}
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})
	t.Logf("every child gone from the members and the plane %s after the HyperJob's deletion", time.Since(deleted).Round(100*time.Millisecond))
	assert.Empty(t, plane.Crashed(), "no plane process crashed")
	for _, m := range sortedNames() {
		assert.Empty(t, members[m].Crashed(), "no process of %s crashed", m)
	}
}

// startHyperJobController runs a controller-runtime manager with hyperbatch's HyperJob controller
// (and the controllers extra adds) against the Karmada apiserver, configured from the plane's
// kubeconfig file, its cache limited to namespace (and cluster-scoped objects).
func startHyperJobController(t *testing.T, namespace string, extra ...func(ctrl.Manager) error) {
	t.Helper()
	stop, err := federation.StartHyperJobController(plane, namespace, 100, 200, extra...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// reconciles is the HyperJob controller's count of successful reconciles (controller-runtime's
// controller_runtime_reconcile_total, in this process's registry).
func reconciles(t *testing.T) float64 {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "controller") == hyperjob.ControllerName && label(m, "result") == "success" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// resourceVersions maps "kind/name" to the resourceVersion of every PropagationPolicy and Volcano
// Job on the plane in ns.
func resourceVersions(ctx context.Context, t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var pps policyv1alpha1.PropagationPolicyList
	require.NoError(t, plane.Client.List(ctx, &pps, client.InNamespace(ns)))
	for _, p := range pps.Items {
		out["PropagationPolicy/"+p.Name] = p.ResourceVersion
	}
	var jobs batchv1alpha1.JobList
	require.NoError(t, plane.Client.List(ctx, &jobs, client.InNamespace(ns)))
	for _, j := range jobs.Items {
		out["Job/"+j.Name] = j.ResourceVersion
	}
	return out
}

// hyperJobEvents lists the Events on the Karmada plane about HyperJob hj with the reason.
func hyperJobEvents(ctx context.Context, ns, hj, reason string) ([]corev1.Event, error) {
	return framework.EventsAbout(ctx, plane.Client, ns, "HyperJob", hj, reason)
}

func suspendedPP(pp *policyv1alpha1.PropagationPolicy) bool {
	s := pp.Spec.Suspension
	return s != nil && s.Dispatching != nil && *s.Dispatching
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// timeline records watch events of several apiservers in the order this process receives them.
type timeline struct {
	ns     string
	mu     sync.Mutex
	events []record
}

type record struct {
	at        time.Time
	src       string // "plane" or the member's name
	typ       watch.EventType
	kind      string
	name      string
	rv        int64 // the plane's resourceVersions are etcd revisions: one order for all its kinds
	suspended bool
	clusters  []string
	phase     batchv1alpha1.JobPhase
	succeeded int32
	podPhase  corev1.PodPhase
}

func (r record) String() string {
	return fmt.Sprintf("%s %s %s %s/%s rv=%d suspended=%v clusters=%v phase=%s%s succeeded=%d", r.at.Format("15:04:05.000"), r.src, r.typ, r.kind, r.name, r.rv, r.suspended, r.clusters, r.phase, r.podPhase, r.succeeded)
}

// watch records every event of list's kind in the namespace tl.ns on the apiserver of cfg until ctx
// ends.
func (tl *timeline) watch(ctx context.Context, t *testing.T, src string, cfg *rest.Config, list client.ObjectList) {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	w, err := c.Watch(ctx, list, client.InNamespace(tl.ns))
	require.NoError(t, err, "watching %T on %s", list, src)
	t.Cleanup(w.Stop)
	go func() {
		for e := range w.ResultChan() {
			r := record{at: time.Now(), src: src, typ: e.Type}
			switch o := e.Object.(type) {
			case *policyv1alpha1.PropagationPolicy:
				r.kind, r.name, r.suspended = "PropagationPolicy", o.Name, suspendedPP(o)
				r.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
			case *workv1alpha2.ResourceBinding:
				r.kind, r.name = "ResourceBinding", o.Name
				r.rv, _ = strconv.ParseInt(o.ResourceVersion, 10, 64)
				for _, tc := range o.Spec.Clusters {
					r.clusters = append(r.clusters, tc.Name)
				}
			case *batchv1alpha1.Job:
				r.kind, r.name, r.phase, r.succeeded = "Job", o.Name, o.Status.State.Phase, o.Status.Succeeded
			case *corev1.Pod:
				r.kind, r.name, r.podPhase = "Pod", o.Name, o.Status.Phase
			default:
				continue
			}
			tl.mu.Lock()
			tl.events = append(tl.events, r)
			tl.mu.Unlock()
		}
	}()
}

func (tl *timeline) snapshot() []record {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.events)
}

func (tl *timeline) first(src, kind, name string) (record, bool) {
	for _, r := range tl.snapshot() {
		if r.src == src && r.kind == kind && r.name == name {
			return r, true
		}
	}
	return record{}, false
}

func (tl *timeline) String() string {
	var b strings.Builder
	for _, r := range tl.snapshot() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}
